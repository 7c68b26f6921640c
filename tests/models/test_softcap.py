"""Logit soft-capping, cap · tanh(x / cap), on the attention scores (``model.attn_softcap``) and on
the output logits (``model.final_softcap``): Gemma 2 (issue 59)."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from src.models import build_model
from src.models.components import attention
from src.models.components.attention import AttentionBias, explicit_attention
from src.models.generation import generate
from tests.conftest import tiny_model_dict


def test_no_cap_is_todays_model_bit_for_bit() -> None:
    torch.manual_seed(0)
    a = build_model(tiny_model_dict()).eval()
    b = build_model(tiny_model_dict(attn_softcap=None, final_softcap=None)).eval()
    b.load_state_dict(a.state_dict())
    ids = torch.randint(0, 97, (2, 16))
    assert torch.equal(a(ids, labels=ids).loss, b(ids, labels=ids).loss)


def test_attention_scores_are_capped_before_the_mask() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 8) * 10 for _ in range(3))
    cap = 2.0
    _, probs = explicit_attention(q, k, v, AttentionBias(is_causal=True), softcap=cap)
    scores = cap * torch.tanh((q @ k.transpose(-2, -1)) / 8**0.5 / cap)
    scores = scores.masked_fill(~torch.ones(5, 5, dtype=torch.bool).tril(), float("-inf"))
    torch.testing.assert_close(probs, scores.softmax(-1))
    # capped scores span at most 2·cap: the largest ratio of two visible probabilities
    ratio = probs[..., -1, :].max(-1).values / probs[..., -1, :].min(-1).values
    assert float(ratio.max()) <= torch.exp(torch.tensor(2 * cap)).item() + 1e-3


def test_attn_softcap_model_takes_the_explicit_path_and_equals_a_huge_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cap far above every score changes nothing (tanh(x/c)·c → x): the explicit path agrees
    with SDPA; with GQA the K/V heads are repeated for it."""
    torch.manual_seed(0)
    over = dict(n_kv_head=2, position={"name": "rope"})
    plain = build_model(tiny_model_dict(**over)).eval()
    capped = build_model(tiny_model_dict(attn_softcap=1e6, **over)).eval()
    small = build_model(tiny_model_dict(attn_softcap=0.01, **over)).eval()
    capped.load_state_dict(plain.state_dict())
    small.load_state_dict(plain.state_dict())
    ids = torch.randint(0, 97, (2, 16))
    with torch.no_grad():
        ref = plain(ids).logits

        def no_sdpa(*args: object, **kwargs: object) -> None:
            raise AssertionError("SDPA cannot soft-cap the scores")

        monkeypatch.setattr(attention, "sdpa_attention", no_sdpa)
        torch.testing.assert_close(capped(ids).logits, ref, atol=1e-5, rtol=1e-5)
        assert (small(ids).logits - ref).abs().max() > 1e-4  # a small cap does change the output


def test_final_cap_bounds_the_logits_and_leaves_shift_and_ignore_index() -> None:
    torch.manual_seed(0)
    cap = 0.5
    model = build_model(tiny_model_dict(final_softcap=cap)).eval()
    ref = build_model(tiny_model_dict()).eval()
    ref.load_state_dict(model.state_dict())
    ids = torch.randint(0, 97, (2, 16))
    labels = ids.clone()
    labels[0, 5:9] = -100
    out = model(ids, labels=labels)
    hidden_logits = ref(ids).logits
    torch.testing.assert_close(out.logits, cap * torch.tanh(hidden_logits / cap))
    assert out.logits.abs().max() <= cap
    # the loss: position t scored against labels[t + 1], -100 not scored, on the capped logits
    manual = F.cross_entropy(
        out.logits[:, :-1].reshape(-1, 97), labels[:, 1:].reshape(-1), ignore_index=-100
    )
    torch.testing.assert_close(out.loss, manual)
    # a training window of T + 1 tokens: every position scored, the same shift
    window = torch.randint(0, 97, (2, 17))
    out = model(window[:, :-1], labels=window)
    manual = F.cross_entropy(out.logits.reshape(-1, 97), window[:, 1:].reshape(-1))
    torch.testing.assert_close(out.loss, manual)


def test_caps_with_generation_cache_match_full_forward() -> None:
    torch.manual_seed(0)
    model = build_model(
        tiny_model_dict(
            attn_softcap=1.0,
            final_softcap=2.0,
            mask={"name": "sliding_window", "window": 3},
            layer_masks=["sliding_window", "causal"],
        )
    ).eval()
    ids = torch.randint(0, 97, (2, 5))
    with torch.no_grad():
        out = generate(model, ids, 10)
        full = model(out).logits
    assert torch.equal(out[:, 5:], full[:, 4:-1].argmax(-1))
