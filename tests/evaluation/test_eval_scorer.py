"""The scorer against transformers: windows, log-likelihoods, batching invariance."""

from __future__ import annotations

import math

import pytest
import torch

from src.evaluation.batching import length_batches
from src.evaluation.scorer import Scorer
from src.evaluation.windows import sliding_windows


@pytest.mark.parametrize(
    "n,ctx,stride", [(200, 64, 32), (200, 64, 64), (65, 64, 16), (10, 64, 32), (130, 48, 17)]
)
def test_sliding_windows_score_every_token_once(n: int, ctx: int, stride: int) -> None:
    windows = sliding_windows(n, ctx, stride)
    scored = [t for w in windows for t in range(w.end - w.n_target, w.end)]
    if stride < ctx:  # overlapping windows: every token but the first, once
        assert scored == list(range(1, n))
    else:  # disjoint windows: the first token of each window has no context (the guide's behaviour)
        assert scored == [t for t in range(n) if t % ctx]
    assert all(w.end - w.begin <= ctx and w.n_target <= w.end - w.begin - 1 for w in windows)


def test_sliding_windows_reject_bad_stride() -> None:
    with pytest.raises(ValueError, match="stride"):
        sliding_windows(100, 64, 65)


def test_length_batches_respect_budgets() -> None:
    lengths = [5, 60, 7, 33, 60, 2, 18, 40]
    batches = length_batches(lengths, max_batch_size=3, max_batch_tokens=100)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        assert len(b) <= 3 and (len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 100)
    assert [lengths[b[0]] for b in batches] == sorted(
        (lengths[b[0]] for b in batches), reverse=True
    )


@pytest.mark.parametrize("ctx,stride", [(64, 32), (64, 64), (48, 17)])
def test_window_nll_matches_transformers(
    scorer: Scorer, hf_model, hf_reference, text_file, ctx: int, stride: int
) -> None:
    ids = scorer.tokenizer.encode(text_file.read_text())[:300]
    nll, n = scorer.window_nll(ids, ctx, stride)
    ref_nll, ref_n = hf_reference.window_nll(hf_model, ids, ctx, stride)
    assert n == ref_n
    assert math.exp(nll / n) == pytest.approx(math.exp(ref_nll / ref_n), rel=1e-4)


def test_loglikelihood_matches_transformers_and_ignores_batching(
    scorer: Scorer, loaded, hf_model, hf_reference
) -> None:
    tok = loaded.tokenizer
    texts = [
        "The cat sat on the",
        "In 1998, the company moved its headquarters to a small town near the",
        "Rain fell all night, and by morning the river had risen above the old bridge. " * 3
        + "Then",
    ]
    requests = [
        scorer.encode_pair(t, c) for t in texts for c in (" mat", " garden and the sea", " x")
    ]
    batched = scorer.loglikelihood(requests)
    single = Scorer(loaded.model, tok, batch_size=1, show_progress=False).loglikelihood(requests)
    for (ctx, cont), b, s in zip(requests, batched, single):
        ref, greedy = hf_reference.loglikelihood(hf_model, ctx, cont)
        assert b.logprob == pytest.approx(ref, rel=1e-4) and b.is_greedy == greedy
        assert b.logprob == pytest.approx(s.logprob, rel=1e-5) and b.n_tokens == len(cont)


def test_greedy_flag_is_true_for_the_argmax_continuation(scorer: Scorer, hf_model) -> None:
    ctx = scorer.tokenizer.encode("He said the train would arrive at")
    with torch.inference_mode():
        nxt = int(hf_model(torch.tensor([ctx])).logits[0, -1].argmax())
    assert scorer.loglikelihood([(ctx, [nxt])])[0].is_greedy
    assert not scorer.loglikelihood([(ctx, [(nxt + 1) % 50257])])[0].is_greedy


def test_encode_pair_moves_trailing_space_to_the_continuation(scorer: Scorer) -> None:
    tok = scorer.tokenizer
    ctx, cont = scorer.encode_pair("Hello ", "world")
    assert tok.decode(ctx) == "Hello" and tok.decode(cont) == " world"


def test_empty_context_is_conditioned_on_endoftext(scorer: Scorer, hf_model, hf_reference) -> None:
    cont = scorer.tokenizer.encode("Hello world")
    got = scorer.loglikelihood([([], cont)])[0]
    ref, _ = hf_reference.loglikelihood(hf_model, [50256], cont)
    assert got.logprob == pytest.approx(ref, rel=1e-4)


def test_generate_matches_transformers_greedy(scorer: Scorer, hf_model) -> None:
    prompts = [
        scorer.tokenizer.encode(p) for p in ("The cat sat", "In 1998, the company", "The dog sat")
    ]
    out = scorer.generate(prompts, max_new_tokens=8)
    for p, o in zip(prompts, out):
        with torch.inference_mode():
            ref = hf_model.generate(
                torch.tensor([p]), max_new_tokens=8, do_sample=False, pad_token_id=50256
            )[0, len(p) :]
        ref = ref.tolist()
        assert o == ref[: len(o)] and (len(o) == 8 or ref[len(o)] == 50256)
