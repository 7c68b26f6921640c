"""Perplexity of a text by strided sliding windows (transformers guide "Perplexity of
fixed-length models").

The text is tokenised once; window k reads ``context_length`` tokens starting at
``k·stride`` and scores only the tokens the previous window did not score, so each token
(but the first, which has no context) is scored once with at least
``context_length - stride`` tokens of context. ``stride = context_length`` gives disjoint
windows (fast, pessimistic); smaller strides approach full-context perplexity.

Reported: ``ppl`` (per BPE token), ``bits_per_byte`` (Σ NLL / UTF-8 bytes / ln 2, which
compares across tokenizers), ``word_ppl`` (exp of Σ NLL / whitespace-separated words, the
figure word-level benchmarks such as WikiText and PTB quote). An encoder-only masked LM
reports the same figures as ``pseudo_*`` (pseudo-log-likelihood, Salazar et al. 2020).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from src.evaluation.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkResult, take
from src.evaluation.inputs import (
    DETOKENIZERS,
    load_hf_dataset,
    looks_like_jsonl,
    open_text,
    read_jsonl,
)
from src.evaluation.scorer import Scorer
from src.evaluation.windows import perplexity_metrics


@BENCHMARKS.register("perplexity")
class Perplexity(Benchmark):
    """Sliding-window perplexity of a text source.

    Source, first that is set: ``path`` (a text file — .txt/.gz/.bz2/.xz, lines are the
    examples — or JSON lines with ``text_field``), else ``source`` (a ``conf/data`` source
    node such as ``{name: tinyshakespeare}``; its ``split`` documents), else ``dataset``
    (Hugging Face ``datasets`` name, ``dataset_config``, ``split``). Rows / documents are
    joined with ``joiner`` as in the transformers guide. ``detokenizer: wikitext`` undoes
    WikiText's tokenisation first. ``limit`` takes the first N lines / records.

    A pre-tokenized source (``{name: openwebtext}`` / ``{name: bin, dir: …}``, written by
    ``src.prepare``) is read as tokens: ``limit`` then counts blocks of ``context_length``
    tokens, and there are no byte or word figures.
    """

    def __init__(
        self,
        path: str | None = None,
        dataset: str | None = None,
        dataset_config: str | None = None,
        source: Mapping[str, Any] | None = None,
        split: str = "test",
        text_field: str = "text",
        joiner: str = "\n\n",
        context_length: int | None = None,
        stride: int | None = None,
        detokenizer: str | None = None,
    ) -> None:
        if detokenizer is not None and detokenizer not in DETOKENIZERS:
            raise ValueError(
                f"detokenizer='{detokenizer}' is not known; use null or one of "
                f"{sorted(DETOKENIZERS)}"
            )
        self.path, self.dataset, self.dataset_config, self.split = (
            path,
            dataset,
            dataset_config,
            split,
        )
        self.source = dict(source) if source else None
        self.text_field, self.joiner = text_field, joiner
        self.context_length, self.stride, self.detokenizer = context_length, stride, detokenizer

    def text(self, limit: int | None = None) -> tuple[str, int]:
        """The evaluated text and the number of records (lines / rows) it was made of."""
        if self.path:
            if looks_like_jsonl(self.path):
                rows = take((r[self.text_field] for r in read_jsonl(self.path)), limit)
                text = self.joiner.join(rows)
            else:
                with open_text(self.path) as f:
                    rows = take(f, limit)  # lines keep their newline: the file's own text
                text = "".join(rows)
        elif self.source:
            rows = take(self._source_documents(), limit)
            text = self.joiner.join(rows)
        elif self.dataset:
            ds = load_hf_dataset(self.dataset, self.dataset_config, self.split, self.key)
            rows = take((r[self.text_field] for r in ds), limit)
            text = self.joiner.join(rows)
        else:
            raise ValueError(
                f"{self.key} has no text source; set {self.key}.path=<text file>, "
                f"{self.key}.source={{name: ...}} or {self.key}.dataset=<name>"
            )
        if self.detokenizer:
            text = DETOKENIZERS[self.detokenizer](text)
        return text, len(rows)

    def _build_source(self) -> Any:
        from src.data.sources import build_source

        return build_source(self.source or {})

    def _source_documents(self) -> list[str]:
        from src.data.sources import LMSource

        src = self._build_source()
        if not isinstance(src, LMSource):
            raise ValueError(
                f"{self.key}.source names '{src.name}', which is not a text (language-modelling) "
                "source"
            )
        splits = src.splits()
        if self.split not in splits and not (self.split == "test" and "val" in splits):
            raise ValueError(
                f"{self.key}.split='{self.split}' is not one of the source's splits "
                f"{sorted(splits)}"
            )
        # a source without test: val doubles as test
        return list(splits.get(self.split, splits.get("val", [])))

    def _bin_tokens(self, scorer: Scorer, limit: int | None, context_length: int) -> Any | None:
        """Tokens of a pre-tokenized ``bin`` / ``openwebtext`` source (``{split}.bin``), or None
        for any other source. ``limit`` counts blocks of ``context_length`` tokens here."""
        if not self.source:
            return None
        from src.data.cache import open_tokens, read_meta
        from src.data.sources.openwebtext import BinDir

        src = self._build_source()
        if not isinstance(src, BinDir):
            return None
        meta = read_meta(src.dir)
        if meta is None:
            raise FileNotFoundError(
                f"{src.dir} has no meta.json; run python -m src.prepare data={src.name} first"
            )
        state = meta.get("tokenizer")
        if state is not None and state != scorer.tokenizer.state_dict():
            raise ValueError(
                f"{src.dir} was tokenized with {state}, but the model's tokenizer is "
                f"{scorer.tokenizer.state_dict()}; prepare the data with the model's tokenizer"
            )
        tokens = open_tokens(src.dir, self.split, meta)
        return tokens if limit is None else tokens[: limit * context_length]

    def run(self, scorer: Scorer, limit: int | None = None) -> BenchmarkResult:
        context_length = self.context_length or scorer.max_length
        stride = self.stride or max(1, context_length // 2)
        text: str | None = None
        tokens = self._bin_tokens(scorer, limit, context_length)
        if tokens is not None:  # already tokens: no byte or word counts
            n_rows = -(-len(tokens) // context_length)
            tokens = torch.from_numpy(tokens.astype("int64"))
        else:
            text, n_rows = self.text(limit)
            tokens = scorer.tokenizer.encode(text)
        nll, n = scorer.window_nll(
            tokens, context_length, stride, description=self.name or "perplexity"
        )
        if n == 0:
            raise ValueError(
                f"{self.key}: the text has {len(tokens)} token(s); at least 2 are needed to score "
                "one"
            )
        words = len(text.split()) if text is not None else None
        metrics = perplexity_metrics(
            nll, n, n_bytes=len(text.encode("utf-8")) if text is not None else None, n_words=words
        )
        # pseudo-log-likelihood: not comparable with a causal model's figures
        if scorer.is_masked_lm:
            metrics = {f"pseudo_{k}": v for k, v in metrics.items()}
        return BenchmarkResult(
            metrics=metrics,
            examples=n_rows,
            details={
                "tokens_scored": n,
                "context_length": context_length,
                "stride": stride,
                # what word_ppl divides by: the table's note reads it
                **({"words": words, "tokens_per_word": len(tokens) / words} if words else {}),
            },
        )
