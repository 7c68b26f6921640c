"""Translation: greedy decoding with the KV cache, scored by corpus BLEU and chrF
(torchmetrics ``SacreBLEUScore`` with sacrebleu's 13a tokenisation, ``CHRFScore``),
reported on sacrebleu's 0–100 scale.

Checkpoints trained on sentence pairs read the source exactly as in training (``src eos``
for an encoder-decoder, ``src eos <sep>`` for a ``decoder_translation`` model) and write
the target up to eos. Other models (e.g. pretrained GPT-2) read ``prompt`` with the
source filled in (then eos when ``source_eos``; by default for encoder-decoders only) and
the translation is what they write up to eos or the first ``stop`` string.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from src.evaluation.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkResult, take
from src.evaluation.scorer import Scorer


def corpus_scores(hypotheses: list[str], references: list[str]) -> dict[str, float]:
    """Corpus BLEU and chrF (0–100) of hypotheses against one reference each."""
    from torchmetrics.text import CHRFScore, SacreBLEUScore

    refs = [[r] for r in references]
    bleu = SacreBLEUScore(tokenize="13a")(hypotheses, refs)
    chrf = CHRFScore()(hypotheses, refs)
    return {"bleu": 100.0 * float(bleu), "chrf": 100.0 * float(chrf)}


@BENCHMARKS.register("translation")
class Translation(Benchmark):
    """Pairs from a data source (``source``, a ``conf/data`` pair-source node such as
    ``{name: multi30k}``) and its ``split``; ``path`` is a shortcut for ``source.path``."""

    def __init__(
        self,
        path: str | None = None,
        source: Mapping[str, Any] | None = None,
        split: str = "test",
        prompt: str = "{source}",
        source_eos: bool | None = None,
        stop: str | None = None,
        max_new_tokens: int = 128,
    ) -> None:
        if "{source}" not in prompt:
            raise ValueError(
                f"prompt={prompt!r} must contain '{{source}}' where the sentence to translate goes"
            )
        self.source_cfg = dict(source or {"name": "multi30k"})
        if path is not None:
            self.source_cfg["path"] = path
        self.split, self.prompt, self.source_eos, self.stop, self.max_new_tokens = (
            split,
            prompt,
            source_eos,
            stop,
            max_new_tokens,
        )

    def pairs(self) -> tuple[list[str], list[str]]:
        from src.data.sources import PairSource, build_source

        src = build_source(self.source_cfg)
        if not isinstance(src, PairSource):
            raise ValueError(
                f"{self.key}.source names '{self.source_cfg.get('name')}', which is not a "
                "sentence-pair source"
            )
        splits = src.pairs()
        if self.split not in splits:
            raise ValueError(
                f"{self.key}.split='{self.split}' is not one of the source's splits "
                f"{sorted(splits)}"
            )
        return splits[self.split]

    def run(self, scorer: Scorer, limit: int | None = None) -> BenchmarkResult:
        sources, references = self.pairs()
        sources, references = take(sources, limit), take(references, limit)
        tok = scorer.tokenizer
        if scorer.pair_format is not None:  # a checkpoint trained on pairs: its own source format
            prompts = [tok.encode(s) + scorer.pair_format.source_suffix for s in sources]
        else:
            # null: encoder-decoders only
            add_eos = scorer.is_seq2seq if self.source_eos is None else self.source_eos
            eos = [tok.eos_token_id] if add_eos and tok.eos_token_id is not None else []
            prompts = [tok.encode(self.prompt.format(source=s)) + eos for s in sources]
        stop_ids = tok.encode(self.stop) if self.stop else []
        outputs = scorer.generate(
            prompts,
            self.max_new_tokens,
            stop_ids=stop_ids[:1],
            description=self.name or "translation",
        )
        hypotheses = [tok.decode(ids) for ids in outputs]
        if self.stop:
            hypotheses = [h.split(self.stop)[0] for h in hypotheses]
        hypotheses = [h.strip() for h in hypotheses]
        return BenchmarkResult(
            metrics=corpus_scores(hypotheses, references),
            examples=len(sources),
            details={
                "samples": [
                    {"source": s, "reference": r, "hypothesis": h}
                    for s, r, h in list(zip(sources, references, hypotheses))[:5]
                ]
            },
        )
