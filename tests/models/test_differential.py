"""Differential attention (``model/attention=differential``, Ye et al. 2024), issue 59: the formula
against a direct implementation, λ's initialisation, every mask and family, the KV cache, sinks and
soft-caps, parameters, FLOPs and ``match_params``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from src.errors import ConfigError, HFConversionError
from src.models import build_model
from src.models.components.attention import AttentionBias
from src.models.components.differential import DifferentialAttention, lambda_init
from src.models.config import ModelConfig
from src.models.generation import generate
from src.models.hf import to_hf
from src.models.matching import MatchParams, count_parameters, match_model
from tests.conftest import tiny_model_dict

DIFF = {"name": "differential"}


def test_standard_is_todays_model_bit_for_bit() -> None:
    torch.manual_seed(0)
    a = build_model(tiny_model_dict()).eval()
    torch.manual_seed(0)
    b = build_model(tiny_model_dict(attention={"name": "standard"})).eval()
    assert a.state_dict().keys() == b.state_dict().keys()
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k])
    ids = torch.randint(0, 97, (2, 16))
    assert torch.equal(a(ids, labels=ids).loss, b(ids, labels=ids).loss)


def direct(attn: DifferentialAttention, x: torch.Tensor, n_kv: int) -> torch.Tensor:
    """The reference code's layout (multihead_diffattn.py): q, k as 2h / 2k maps of d channels, v as
    h / k heads of 2d, softmax maps subtracted, RMSNorm per head, × (1 − λ_init)."""
    B, T, C = x.shape
    H, D = attn.n_head, attn.head_dim
    h, kh = H // 2, n_kv // 2
    q, k, v = attn.qkv(x).split([H * D, n_kv * D, n_kv * D], dim=-1)
    q = q.view(B, T, 2 * h, D).transpose(1, 2)  # [B, 2h, T, d]
    k = k.view(B, T, 2 * kh, D).transpose(1, 2).repeat_interleave(h // kh, dim=1)
    v = v.view(B, T, kh, 2 * D).transpose(1, 2).repeat_interleave(h // kh, dim=1)  # [B, h, T, 2d]
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    w = s.softmax(-1).view(B, h, 2, T, T)
    lam = (
        torch.exp(attn.lambda_q1 @ attn.lambda_k1)
        - torch.exp(attn.lambda_q2 @ attn.lambda_k2)
        + lambda_init(2)
    )
    o = (w[:, :, 0] - lam * w[:, :, 1]) @ v  # [B, h, T, 2d]
    o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + 1e-5) * attn.head_norm.weight
    o = o * (1 - lambda_init(2))
    return attn.out(o.transpose(1, 2).reshape(B, T, C))


@pytest.mark.parametrize("n_kv", [4, 2])
@pytest.mark.parametrize("need_weights", [False, True], ids=["sdpa", "explicit"])
def test_formula_matches_a_direct_implementation(n_kv: int, need_weights: bool) -> None:
    torch.manual_seed(0)
    attn = DifferentialAttention(16, 4, n_kv, layer=2).double()
    with torch.no_grad():
        attn.head_norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    got = attn(x, AttentionBias(is_causal=True), need_weights=need_weights).out
    torch.testing.assert_close(got, direct(attn, x, n_kv), atol=1e-6, rtol=0)


def test_lambda_initialisation_per_layer() -> None:
    """λ_init = 0.8 − 0.6 · exp(−0.3 · (l − 1)), l = 1 … L within each stack (the paper's)."""
    assert lambda_init(0) == pytest.approx(0.2)
    assert lambda_init(1) == pytest.approx(0.8 - 0.6 * math.exp(-0.3))
    assert lambda_init(40) == pytest.approx(0.8, abs=1e-5)
    model = build_model(tiny_model_dict(n_layer=4, attention=DIFF))
    for i, block in enumerate(model.decoder.blocks):
        attn = block.attn
        assert attn.lambda_init == pytest.approx(0.8 - 0.6 * math.exp(-0.3 * i))
        with torch.no_grad():
            expect = (
                math.exp(float(attn.lambda_q1 @ attn.lambda_k1))
                - math.exp(float(attn.lambda_q2 @ attn.lambda_k2))
                + attn.lambda_init
            )
            assert float(attn.lam()) == pytest.approx(expect, rel=1e-6)
            # the reference's N(0, 0.1²) draws: λ starts near λ_init
            assert abs(float(attn.lam()) - attn.lambda_init) < 0.2


CASES: dict[str, dict[str, Any]] = {
    "causal": {},
    "prefix_lm": {"mask": {"name": "prefix_lm"}},
    "window": {"mask": {"name": "sliding_window", "window": 3}},
    "layer_masks_rope_gqa": {
        "mask": {"name": "sliding_window", "window": 3},
        "layer_masks": ["sliding_window", "causal"],
        "position": {"name": "rope"},
        "n_kv_head": 2,
    },
    "encoder_only": {"family": "encoder_only", "mask": {"name": "bidirectional"}},
    "encoder_only_window": {
        "family": "encoder_only",
        "mask": {"name": "sliding_window", "window": 3},
        "layer_masks": ["sliding_window", "bidirectional"],
    },
    "learned_sink": {"sinks": {"name": "learned"}},
    "sink_tokens": {"sinks": {"name": "token", "count": 2}},
    "softcap": {"attn_softcap": 50.0},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_mask_and_family_trains(case: str) -> None:
    """A finite loss and a gradient on every λ in each mask, family, sink and soft-cap."""
    torch.manual_seed(0)
    model = build_model(tiny_model_dict(attention=DIFF, **CASES[case]))
    ids = torch.randint(0, 97, (2, 12))
    extra = {"prefix_length": torch.tensor([3, 5])} if case == "prefix_lm" else {}
    loss = model(ids, labels=ids, **extra).loss
    assert torch.isfinite(loss)
    loss.backward()
    for block in model.decoder.blocks if hasattr(model, "decoder") else model.encoder.blocks:
        assert block.attn.lambda_q1.grad is not None and block.attn.lambda_q1.grad.abs().sum() > 0


@pytest.mark.parametrize("case", ["causal", "window", "layer_masks_rope_gqa", "sink_tokens"])
def test_greedy_generation_with_the_cache_equals_the_full_forward(case: str) -> None:
    torch.manual_seed(0)
    model = build_model(tiny_model_dict(attention=DIFF, **CASES[case])).eval()
    prompt = torch.randint(0, 97, (2, 5))
    with torch.no_grad():
        out = generate(model, prompt, max_new_tokens=12, use_cache=True)
        full = model(out).logits  # [B, T, V]
    for t in range(prompt.shape[1], out.shape[1]):
        assert torch.equal(out[:, t], full[:, t - 1].argmax(-1))


def test_a_hidden_sink_and_a_far_cap_change_nothing() -> None:
    """The learned sink logit and the soft-cap act on each of the two maps as on a standard head."""
    torch.manual_seed(0)
    plain = build_model(tiny_model_dict(attention=DIFF)).eval()
    ids = torch.randint(0, 97, (2, 12))
    with torch.no_grad():
        ref = plain(ids).logits
        capped = build_model(tiny_model_dict(attention=DIFF, attn_softcap=1e6)).eval()
        capped.load_state_dict(plain.state_dict())
        torch.testing.assert_close(capped(ids).logits, ref, atol=1e-5, rtol=0)
        sunk = build_model(tiny_model_dict(attention=DIFF, sinks={"name": "learned"})).eval()
        state = dict(plain.state_dict())
        for name, p in sunk.state_dict().items():
            if name.endswith("sink.logit"):
                state[name] = torch.full_like(p, -1e4)
        sunk.load_state_dict(state)
        torch.testing.assert_close(sunk(ids).logits, ref, atol=1e-6, rtol=0)


def test_encoder_decoder_self_attention_is_differential_cross_is_standard() -> None:
    torch.manual_seed(0)
    cfg = tiny_model_dict(
        family="encoder_decoder", n_encoder_layer=2, n_decoder_layer=2, attention=DIFF
    )
    cfg.pop("n_layer", None)
    model = build_model(cfg)
    for block in [*model.encoder.blocks, *model.decoder.blocks]:
        assert isinstance(block.attn, DifferentialAttention)
    assert not isinstance(model.decoder.blocks[0].cross_attn, DifferentialAttention)
    src, tgt = torch.randint(0, 97, (2, 7)), torch.randint(0, 97, (2, 6))
    assert torch.isfinite(model(src, decoder_input_ids=tgt, labels=tgt).loss)


def test_parameters_and_flops_are_counted() -> None:
    """λq1, λk1, λq2, λk2 [d] and the head norm's weight [2d] per layer; FLOPs by direct count."""
    plain = build_model(tiny_model_dict())
    diff = build_model(tiny_model_dict(attention=DIFF))
    D, L = 8, 2  # d_model 32 / 4 heads
    assert diff.num_parameters() - plain.num_parameters() == L * (4 * D + 2 * D)
    assert count_parameters(tiny_model_dict(attention=DIFF)) == diff.num_parameters()
    B, T, C, H = 2, 16, 32, 4
    proj = 2 * B * T * C * (3 * C) + 2 * B * T * C * C  # qkv and out (their biases not counted)
    qk = 2 * B * H * T * T * D  # both maps of the H / 2 heads: H maps of d channels
    pv = 2 * B * H * T * T * (2 * D)  # each map reads its head's 2d-channel value
    sub = 2 * B * (H // 2) * T * (2 * D)  # y1 − λ y2
    attn = diff.decoder.blocks[0].attn
    assert attn.forward_flops(B, T, T) == proj + qk + pv + sub
    assert attn.forward_flops(B, T, T) > plain.decoder.blocks[0].attn.forward_flops(B, T, T)


def test_matched_to_standard_within_tolerance() -> None:
    model = dict(tiny_model_dict(attention=DIFF), n_layer=4, d_ff=128)
    solved, r = match_model(model, MatchParams({"attention": {"name": "standard"}}, tolerance=0.01))
    assert solved["attention"] == DIFF
    standard = count_parameters(dict(model, attention={"name": "standard"}))
    assert r.reference_params == standard
    assert r.params == count_parameters(solved) == build_model(solved).num_parameters()
    assert abs(r.params - standard) / standard <= 0.01 and abs(r.rel_error) <= 0.01


@pytest.mark.parametrize("over", [{"n_head": 3, "d_model": 33}, {"n_kv_head": 1}])
def test_odd_heads_are_refused_in_one_line(over: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"model/attention=differential .* must be even"):
        ModelConfig.from_dict(tiny_model_dict(attention=DIFF, **over))


def test_sdpa_and_explicit_paths_agree() -> None:
    torch.manual_seed(0)
    attn = DifferentialAttention(16, 4, 2, layer=1).eval()
    x = torch.randn(2, 6, 16)
    bias = AttentionBias(mask=torch.rand(2, 1, 6, 6) > 0.3)
    bias.mask[..., 0] = True  # every query sees a key
    a = attn(x, bias).out
    b = attn(x, bias, need_weights=True)
    torch.testing.assert_close(a, b.out, atol=1e-5, rtol=0)
    assert b.probs is not None and b.probs.shape == (2, 4, 6, 6)  # the H maps


def test_no_transformers_format_takes_it(tmp_path: Path) -> None:
    """A transformers checkpoint has no field for it: export refuses, naming the key."""
    pytest.importorskip("transformers")
    model = build_model(tiny_model_dict(attention=DIFF))
    with pytest.raises(HFConversionError, match=r"model\.attention=.*needs \{'name': 'standard'\}"):
        to_hf(model, tmp_path)
