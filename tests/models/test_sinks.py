"""Attention sinks (``model/sinks``): a learned logit per head in the softmax's denominator
(gpt-oss; Miller 2023), issue 59."""

from __future__ import annotations

import pytest
import torch

from src.models import build_model
from src.models.components import attention
from src.models.components.attention import AttentionBias, explicit_attention
from src.models.components.sinks import SinkLogit
from src.models.generation import generate
from src.probes import probe_batch, run_probes
from tests.conftest import tiny_model_dict


def test_sinks_none_is_todays_model_bit_for_bit() -> None:
    torch.manual_seed(0)
    a = build_model(tiny_model_dict()).eval()
    torch.manual_seed(0)
    b = build_model(tiny_model_dict(sinks={"name": "none"})).eval()
    assert a.state_dict().keys() == b.state_dict().keys()
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k])
    ids = torch.randint(0, 97, (2, 16))
    assert torch.equal(a(ids, labels=ids).loss, b(ids, labels=ids).loss)


def test_learned_sink_matches_the_direct_formula() -> None:
    """p_ij = exp(s_ij) / (exp(b_h) + Σ_j exp(s_ij)) over the visible keys, to 1e-6."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, dtype=torch.float64) for _ in range(3))
    sink = SinkLogit(3).double()
    with torch.no_grad():
        sink.logit.copy_(torch.tensor([-1.0, 0.0, 2.5]))
    out, probs = explicit_attention(q, k, v, AttentionBias(is_causal=True), sink=sink)
    s = (q @ k.transpose(-2, -1)) / 8**0.5  # [B, H, T, S]
    keep = torch.ones(5, 5, dtype=torch.bool).tril()
    e = s.exp() * keep
    b = sink.logit.detach().exp().view(1, 3, 1, 1)
    expected = e / (b + e.sum(-1, keepdim=True))
    torch.testing.assert_close(probs, expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(out, expected @ v, atol=1e-6, rtol=0)
    assert bool((probs.sum(-1) < 1).all())  # the sink's share is taken from every row


def test_learned_sink_model_takes_the_explicit_path_and_a_hidden_sink_is_plain_attention(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sink logit far below every score changes nothing (GQA included); the explicit path runs."""
    torch.manual_seed(0)
    over = dict(n_kv_head=2, position={"name": "rope"})
    plain = build_model(tiny_model_dict(**over)).eval()
    sunk = build_model(tiny_model_dict(sinks={"name": "learned"}, **over)).eval()
    state = dict(plain.state_dict())
    for name, p in sunk.state_dict().items():
        if name.endswith("sink.logit"):
            state[name] = torch.full_like(p, -1e4)
    sunk.load_state_dict(state)
    ids = torch.randint(0, 97, (2, 16))
    with torch.no_grad():
        ref = plain(ids).logits

        def no_sdpa(*args: object, **kwargs: object) -> None:
            raise AssertionError("SDPA cannot add a sink logit")

        monkeypatch.setattr(attention, "sdpa_attention", no_sdpa)
        torch.testing.assert_close(sunk(ids).logits, ref, atol=1e-5, rtol=1e-5)


def test_sink_parameters_are_counted_one_per_head_and_layer() -> None:
    plain = build_model(tiny_model_dict())
    sunk = build_model(tiny_model_dict(sinks={"name": "learned"}))
    assert sunk.num_parameters() - plain.num_parameters() == 2 * 4  # n_layer × n_head
    assert sunk.decoder.blocks[0].attn.sink.logit.shape == (4,)


def test_sink_mass_is_the_sink_logits_share_and_a_large_logit_takes_it_all() -> None:
    model = build_model(tiny_model_dict(sinks={"name": "learned"})).eval()
    batch = probe_batch(model, batch_size=2, length=16, seed=0)
    with torch.no_grad():
        maps = model.attention_probs(**batch.probs)
        result = run_probes(model, batch)
        for layer, a in enumerate(maps):
            share = (1 - a.probs.sum(-1)).mean(dim=(0, 2))  # [H]
            torch.testing.assert_close(result.sink[""][layer], share)
        for block in model.decoder.blocks:
            block.attn.sink.logit.fill_(30.0)
        big = run_probes(model, batch)
    for layer in range(2):
        assert big.sink[""][layer].min().item() > 0.999
        assert result.sink[""][layer].max().item() < big.sink[""][layer].min().item()
    assert big.metrics()["probe/sink_mass@L0"] > 0.999


def test_without_sinks_sink_mass_is_still_the_first_keys_share() -> None:
    model = build_model(tiny_model_dict()).eval()
    batch = probe_batch(model, batch_size=2, length=16, seed=0)
    with torch.no_grad():
        maps = model.attention_probs(**batch.probs)
        result = run_probes(model, batch)
    for layer, a in enumerate(maps):
        torch.testing.assert_close(result.sink[""][layer], a.probs[:, :, 1:, 0].mean(dim=(0, 2)))


@pytest.mark.parametrize("mask", ["causal", "sliding_window"])
def test_greedy_generation_with_the_cache_equals_the_full_forward(mask: str) -> None:
    torch.manual_seed(0)
    node = {"name": mask, **({"window": 4} if mask == "sliding_window" else {})}
    model = build_model(tiny_model_dict(sinks={"name": "learned"}, mask=node)).eval()
    with torch.no_grad():
        for block in model.decoder.blocks:
            block.attn.sink.logit.normal_()
    prompt = torch.randint(0, 97, (2, 5))
    with torch.no_grad():
        out = generate(model, prompt, max_new_tokens=8, use_cache=True)
        full = model(out).logits  # [B, T, V]
    for t in range(prompt.shape[1], out.shape[1]):
        assert torch.equal(out[:, t], full[:, t - 1].argmax(-1))


def test_sink_logits_learn() -> None:
    model = build_model(tiny_model_dict(sinks={"name": "learned"}))
    ids = torch.randint(0, 97, (2, 16))
    model(ids, labels=ids).loss.backward()
    grad = model.decoder.blocks[0].attn.sink.logit.grad
    assert grad is not None and bool((grad != 0).any())
