"""``model/norm=gemma_rmsnorm``: x / rms(x) · (1 + g) with g from zero, equal to ``rmsnorm`` with
weight 1 + g; the gain is applied in float32 before the cast back (Gemma's order)."""

from __future__ import annotations

import torch

from src.models import build_model
from src.models.components.gemma_rmsnorm import GemmaRMSNorm
from src.models.components.norms import NORMS, RMSNorm


def test_equals_rmsnorm_with_a_unit_offset() -> None:
    torch.manual_seed(0)
    gemma, plain = GemmaRMSNorm(16, eps=1e-5), RMSNorm(16, eps=1e-5)
    assert torch.equal(gemma.weight, torch.zeros(16))  # the identity gain at the start
    with torch.no_grad():
        gemma.weight.normal_(0.0, 0.3)
        plain.weight.copy_(1.0 + gemma.weight)
    x = torch.randn(2, 5, 16) * 3.0
    torch.testing.assert_close(gemma(x), plain(x), atol=1e-6, rtol=1e-6)
    rms = x.pow(2).mean(-1, keepdim=True).add(1e-5).sqrt()
    torch.testing.assert_close(gemma(x), x / rms * (1.0 + gemma.weight), atol=1e-6, rtol=1e-6)


def test_bf16_applies_the_gain_before_the_cast() -> None:
    norm = GemmaRMSNorm(8)
    with torch.no_grad():
        norm.weight.fill_(0.01)
    x = torch.randn(3, 8)
    x32 = x.to(torch.bfloat16).float()
    expected = (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6) * 1.01).bfloat16()
    got = norm(x.to(torch.bfloat16))
    assert got.dtype == torch.bfloat16 and torch.equal(got, expected)


def test_registered_and_built_from_the_config() -> None:
    assert "gemma_rmsnorm" in NORMS.names()
    model = build_model(
        dict(
            family="decoder_only",
            vocab_size=50,
            d_model=16,
            n_layer=1,
            n_head=2,
            d_ff=32,
            max_seq_len=8,
            norm={"name": "gemma_rmsnorm", "eps": 1e-5},
        )
    )
    norms = [m for m in model.modules() if isinstance(m, GemmaRMSNorm)]
    assert len(norms) == 3 and all(n.eps == 1e-5 for n in norms)  # attn, ffn, final
