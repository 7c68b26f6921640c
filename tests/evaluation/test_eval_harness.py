"""The lm-evaluation-harness request functions (tested without the harness installed)."""

from __future__ import annotations

import importlib.util

import pytest

from src.evaluation import harness
from src.evaluation.scorer import Scorer


def test_loglikelihood_rolling_scores_every_token(scorer: Scorer, hf_model, hf_reference) -> None:
    # > 128 tokens
    text = "Rain fell all night, and by morning the river had risen above the old bridge. " * 9
    ids = scorer.tokenizer.encode(text)
    assert len(ids) > 2 * scorer.max_length
    # the harness's disjoint windows: 64 targets each, the first after <|endoftext|>, later ones after one token,
    # the last with as much context as fits
    ref, L, padded = 0.0, 64, [50256] + ids
    for start in range(0, len(ids), L):
        cont = ids[start : start + L]
        ref += hf_reference.loglikelihood(hf_model, padded[: start + 1], cont)[0]
    assert harness.loglikelihood_rolling(scorer, [text])[0] == pytest.approx(ref, rel=1e-4)


def test_loglikelihood_pairs(scorer: Scorer, hf_model, hf_reference) -> None:
    ((lp, greedy),) = harness.loglikelihood(scorer, [("The cat sat on the", " mat")])
    ctx, cont = scorer.encode_pair("The cat sat on the", " mat")
    ref, ref_greedy = hf_reference.loglikelihood(hf_model, ctx, cont)
    assert lp == pytest.approx(ref, rel=1e-4) and greedy == ref_greedy


def test_generate_until_cuts_at_the_stop_string(scorer: Scorer) -> None:
    (full,) = harness.generate_until(scorer, [("The cat sat", {"max_gen_toks": 12})])
    assert full
    stop = full[len(full) // 2 : len(full) // 2 + 2]
    (cut,) = harness.generate_until(
        scorer, [("The cat sat", {"until": [stop], "max_gen_toks": 12})]
    )
    assert cut == full.split(stop)[0]


@pytest.mark.skipif(
    importlib.util.find_spec("lm_eval") is None, reason="lm-eval is an optional extra"
)
def test_harness_model_is_registered(tiny_gpt2_dir) -> None:  # pragma: no cover - needs the extra
    from lm_eval.api.registry import get_model

    assert get_model("transformer-lab") is harness.HarnessLM
