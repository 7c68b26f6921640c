"""Our models inside EleutherAI's lm-evaluation-harness (optional: ``pip install -e .[lm-eval]``).

::

    lm_eval --model transformer-lab --model_args pretrained=gpt2 --tasks lambada_openai,hellaswag
    lm_eval --model transformer-lab --model_args ckpt_path=outputs/.../last.ckpt --tasks wikitext

(``lm_eval`` on the command line finds the model once this module is imported, e.g. via
``python -c "import src.evaluation.harness, lm_eval.__main__ as m; m.cli_evaluate()" …``;
from Python, pass ``HarnessLM(...)`` to ``lm_eval.simple_evaluate(model=...)``.)

The three request types are answered by plain functions on a ``Scorer`` (testable without
the harness); ``HarnessLM`` only adapts the harness's ``Instance`` objects to them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from src.evaluation.loading import load_model
from src.evaluation.scorer import Scorer


def loglikelihood(scorer: Scorer, pairs: Sequence[tuple[str, str]]) -> list[tuple[float, bool]]:
    """(context, continuation) strings -> (log p(continuation | context), is greedy)."""
    scores = scorer.loglikelihood(
        [scorer.encode_pair(c, x) for c, x in pairs], description="loglikelihood"
    )
    return [(s.logprob, s.is_greedy) for s in scores]


def loglikelihood_rolling(scorer: Scorer, texts: Sequence[str]) -> list[float]:
    """Total log-likelihood of each text, every token scored, as the harness's rolling
    windows: disjoint windows of ``max_seq_len`` targets, the first conditioned on the
    prefix token (<|endoftext|>), each later one on the token before it."""
    L = scorer.max_length
    requests: list[tuple[list[int], list[int]]] = []
    owner: list[int] = []
    for t, text in enumerate(texts):
        tokens = scorer.tokenizer.encode(text)
        padded = [scorer.prefix_token()] + tokens
        for start in range(0, len(tokens), L):
            # the scorer keeps the last L+1 tokens of context+continuation: 1 token of context here
            requests.append((padded[: start + 1], tokens[start : start + L]))
            owner.append(t)
    totals = [0.0] * len(texts)
    for t, s in zip(owner, scorer.loglikelihood(requests, description="loglikelihood_rolling")):
        totals[t] += s.logprob
    return totals


def generate_until(
    scorer: Scorer, requests: Sequence[tuple[str, dict[str, Any]]], max_gen_toks: int = 256
) -> list[str]:
    """(context, gen_kwargs) -> continuation, cut at the first ``until`` string.

    gen_kwargs: ``until`` (str or list), ``max_gen_toks``, ``do_sample``, ``temperature``,
    ``top_k``, ``top_p``. Requests sharing their settings are batched together.
    """
    out: list[str | None] = [None] * len(requests)
    groups: dict[tuple, list[int]] = {}
    for i, (_, kw) in enumerate(requests):
        kw = dict(kw or {})
        until = kw.pop("until", None) or []
        until = [until] if isinstance(until, str) else list(until)
        key = (
            tuple(until),
            int(kw.pop("max_gen_toks", max_gen_toks)),
            bool(kw.pop("do_sample", False)),
            float(kw.pop("temperature", 1.0) or 0.0),
            kw.pop("top_k", None),
            kw.pop("top_p", None),
        )
        groups.setdefault(key, []).append(i)
    for (until, max_new, do_sample, temperature, top_k, top_p), idx in groups.items():
        prompts = [scorer.tokenizer.encode(requests[i][0]) for i in idx]
        sample = do_sample and temperature > 0
        new = scorer.generate(
            prompts,
            max_new,
            do_sample=sample,
            temperature=temperature if sample else 1.0,
            top_k=top_k,
            top_p=top_p,
            description="generate_until",
        )
        for i, ids in zip(idx, new):
            text = scorer.tokenizer.decode(ids)
            for stop in until:
                text = text.split(stop)[0]
            out[i] = text
    return out  # type: ignore[return-value]


try:
    from lm_eval.api.model import LM
    from lm_eval.api.registry import register_model
except ImportError:  # the harness is an optional extra
    LM = None  # type: ignore[assignment,misc]

if LM is not None:

    @register_model("transformer-lab")
    class HarnessLM(LM):  # type: ignore[misc,valid-type]
        """lm-evaluation-harness model: ``pretrained=<hub name or dir>`` or ``ckpt_path=<ckpt>``."""

        def __init__(
            self,
            pretrained: str | None = None,
            ckpt_path: str | None = None,
            device: str | None = "auto",
            dtype: str = "float32",
            batch_size: int | str | None = 32,
            max_batch_tokens: int = 16384,
            max_gen_toks: int = 256,
            **unused: Any,
        ) -> None:
            super().__init__()
            loaded = load_model(pretrained, ckpt_path, None, device or "auto", dtype)
            # "auto" -> our token budget decides
            size = int(batch_size) if str(batch_size).isdigit() else 32
            self.scorer = Scorer(
                loaded.model,
                loaded.tokenizer,
                batch_size=size,
                max_batch_tokens=int(max_batch_tokens),
                pair_format=loaded.pair_format,
                mask_token_id=loaded.mask_token_id,
            )
            self.max_gen_toks = int(max_gen_toks)

        def loglikelihood(
            self, requests: list[Any], disable_tqdm: bool = False
        ) -> list[tuple[float, bool]]:
            return loglikelihood(self.scorer, [tuple(r.args[:2]) for r in requests])

        def loglikelihood_rolling(
            self, requests: list[Any], disable_tqdm: bool = False
        ) -> list[float]:
            return loglikelihood_rolling(self.scorer, [r.args[0] for r in requests])

        def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
            return generate_until(
                self.scorer, [(r.args[0], r.args[1]) for r in requests], self.max_gen_toks
            )
