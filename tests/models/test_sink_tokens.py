"""Sink tokens (``model/sinks=token``, ``model.sinks.count``): learned tokens every query sees
(StreamingLLM; registers), issue 59."""

from __future__ import annotations

import pytest
import torch

from src.models import build_model
from src.models.components.attention import AttentionBias
from src.models.components.block import Stack
from src.models.components.flops import attention_score_flops
from src.models.components.sinks import SinkKeys
from src.models.generation import generate
from src.probes import probe_batch, run_probes
from tests.conftest import tiny_model_dict

TOKEN = {"name": "token", "count": 3}


def _keys(n: int = 2) -> SinkKeys:
    k = torch.randn(1, 1, n, 4)
    return SinkKeys(n, kv=[(k, k)], capturing=False)


@pytest.mark.parametrize(
    "bias",
    [
        AttentionBias(is_causal=True),
        AttentionBias(mask=torch.zeros(1, 1, 5, 5, dtype=torch.bool)),  # nothing visible
        AttentionBias(mask=torch.full((1, 1, 5, 5), -1e9)),
        AttentionBias(),
    ],
)
def test_the_sinks_stay_visible_whatever_the_mask(bias: AttentionBias) -> None:
    k = torch.randn(2, 1, 5, 4)
    k2, v2, out = _keys().prepend(0, k, k, bias, 5)
    assert k2.shape == v2.shape == (2, 1, 7, 4)
    assert torch.equal(k2[:, :, 2:], k)
    assert not out.is_causal
    if bias.mask is None and not bias.is_causal:
        assert out.mask is None
        return
    m = out.mask
    assert m is not None and m.shape[-2:] == (5, 7)
    sinks = m[..., :2]
    assert bool(sinks.all()) if m.dtype == torch.bool else bool((sinks == 0).all())
    if bias.is_causal:  # the sequence's columns keep the causal mask
        assert torch.equal(m[0, 0, :, 2:], torch.ones(5, 5, dtype=torch.bool).tril())


@pytest.mark.parametrize("family", ["decoder_only", "encoder_only"])
def test_outputs_keep_their_length_and_sink_mass_is_the_sinks_share(family: str) -> None:
    torch.manual_seed(0)
    mask = {"name": "causal" if family == "decoder_only" else "bidirectional"}
    model = build_model(tiny_model_dict(family=family, mask=mask, sinks=TOKEN)).eval()
    ids = torch.randint(0, 97, (2, 12))
    out = model(ids, labels=ids)
    assert out.logits.shape == (2, 12, 97) and torch.isfinite(out.loss)
    batch = probe_batch(model, batch_size=2, length=16, seed=0)
    with torch.no_grad():
        maps = model.attention_probs(**batch.probs)
        result = run_probes(model, batch)
    for layer, a in enumerate(maps):
        assert a.probs.shape[-2:] == (16, 16)  # the sequence's keys only
        share = 1 - a.probs.sum(-1)  # [B, H, T]: what the sinks took
        assert bool((share > 0).all())
        torch.testing.assert_close(result.sink[""][layer], share.mean(dim=(0, 2)))


def test_the_decoder_stays_causal_and_rows_stay_independent() -> None:
    torch.manual_seed(0)
    model = build_model(tiny_model_dict(sinks=TOKEN)).eval()
    a = torch.randint(0, 97, (2, 12))
    b = a.clone()
    b[0, 8:] = (b[0, 8:] + 1) % 97  # a later change in row 0
    b[1] = (b[1] + 5) % 97  # row 1 all new
    with torch.no_grad():
        la, lb = model(a).logits, model(b).logits
    torch.testing.assert_close(la[0, :8], lb[0, :8])


@pytest.mark.parametrize("mask", ["causal", "sliding_window", "prefix_lm"])
def test_greedy_generation_with_the_cache_equals_the_full_forward(
    mask: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sinks are computed once per generation (kept by the cache, outside the rolling window),
    and every greedy token is the full forward's argmax."""
    torch.manual_seed(0)
    node = {"name": mask, **({"window": 3} if mask == "sliding_window" else {})}
    model = build_model(tiny_model_dict(sinks=TOKEN, mask=node)).eval()
    calls = []
    real = Stack.sink_keys

    def counted(self: Stack, dtype: torch.dtype) -> SinkKeys:
        calls.append(1)
        return real(self, dtype)

    monkeypatch.setattr(Stack, "sink_keys", counted)
    prompt = torch.randint(0, 97, (2, 5))
    extra = {"prefix_length": torch.tensor([3, 5])} if mask == "prefix_lm" else {}
    with torch.no_grad():
        out = generate(model, prompt, max_new_tokens=9, use_cache=True, **extra)
        assert len(calls) == 1
        full = model(out, **extra).logits  # [B, T, V]
    for t in range(prompt.shape[1], out.shape[1]):
        assert torch.equal(out[:, t], full[:, t - 1].argmax(-1))


def test_sink_parameters_and_flops_are_counted() -> None:
    plain = build_model(tiny_model_dict())
    sunk = build_model(tiny_model_dict(sinks=TOKEN))
    assert sunk.num_parameters() - plain.num_parameters() == 3 * 32  # count × d_model
    B, T, L, H, D = 2, 16, 2, 4, 8
    sink_pass = sum(block.forward_flops(1, 3) for block in sunk.decoder.blocks)
    extra = L * attention_score_flops(B, H, T, 3, D)  # every query's 3 extra keys
    assert sunk.forward_flops(B, T) - plain.forward_flops(B, T) == sink_pass + extra


def test_sink_tokens_learn() -> None:
    model = build_model(tiny_model_dict(sinks=TOKEN))
    ids = torch.randint(0, 97, (2, 16))
    model(ids, labels=ids).loss.backward()
    grad = model.decoder.sink_tokens.weight.grad
    assert grad is not None and grad.shape == (3, 32) and bool((grad != 0).any())
