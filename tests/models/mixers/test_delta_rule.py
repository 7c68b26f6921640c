"""The gated delta rule's three forms agree (float64, 1e-5), chunk sizes that do and do not divide
T, with and without an initial state; the chunked form equals transformers' Qwen3-Next reference
``torch_chunk_gated_delta_rule``."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from src.models.mixers.delta_rule import (
    chunk_gated_delta_rule,
    naive_gated_delta_rule,
    recurrent_gated_delta_rule,
)

B, T, H, K, V = 2, 13, 3, 4, 5


def _inputs(seed: int = 0, dtype: torch.dtype = torch.float64):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, T, H, K, generator=gen, dtype=dtype)
    k = F.normalize(torch.randn(B, T, H, K, generator=gen, dtype=dtype), dim=-1)
    v = torch.randn(B, T, H, V, generator=gen, dtype=dtype)
    g = -torch.rand(B, T, H, generator=gen, dtype=dtype)  # log α ∈ (−1, 0]
    beta = torch.rand(B, T, H, generator=gen, dtype=dtype)
    state = torch.randn(B, H, K, V, generator=gen, dtype=dtype)
    return q, k, v, g, beta, state


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("chunk", [1, 3, 8, T, 5, 16])
def test_three_forms_agree(chunk: int, with_state: bool) -> None:
    q, k, v, g, beta, state = _inputs()
    s0 = state if with_state else None
    o_ref, s_ref = naive_gated_delta_rule(q, k, v, g, beta, initial_state=s0)
    o_rec, s_rec = recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=s0)
    o_chk, s_chk = chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=chunk, initial_state=s0)
    assert o_ref.shape == (B, T, H, V) and s_ref.shape == (B, H, K, V)
    for o, s in ((o_rec, s_rec), (o_chk, s_chk)):
        torch.testing.assert_close(o, o_ref, atol=1e-5, rtol=0)
        torch.testing.assert_close(s, s_ref, atol=1e-5, rtol=0)


def test_splitting_the_sequence_carries_the_state() -> None:
    """Running T in two pieces, the second from the first's final state, equals one run."""
    q, k, v, g, beta, _ = _inputs(1)
    o, s = chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=4)
    cut = 6
    o1, s1 = chunk_gated_delta_rule(*(x[:, :cut] for x in (q, k, v, g, beta)), chunk_size=4)
    o2, s2 = recurrent_gated_delta_rule(*(x[:, cut:] for x in (q, k, v, g, beta)), initial_state=s1)
    torch.testing.assert_close(torch.cat([o1, o2], 1), o, atol=1e-10, rtol=0)
    torch.testing.assert_close(s2, s, atol=1e-10, rtol=0)


def test_a_pure_write_stores_the_value() -> None:
    """β = 1, α = 1, unit k: the state maps k to v exactly (the delta rule overwrites)."""
    k = F.normalize(torch.randn(1, 1, 1, K, dtype=torch.float64), dim=-1)
    v = torch.randn(1, 1, 1, V, dtype=torch.float64)
    ones, zeros = (
        torch.ones(1, 1, 1, dtype=torch.float64),
        torch.zeros(1, 1, 1, dtype=torch.float64),
    )
    old = torch.randn(1, 1, K, V, dtype=torch.float64)
    o, _ = naive_gated_delta_rule(k, k, v, zeros, ones, initial_state=old, scale=1.0)
    torch.testing.assert_close(o, v, atol=1e-12, rtol=0)


def test_half_precision_inputs_compute_in_float32() -> None:
    q, k, v, g, beta, _ = _inputs(2)
    o64, _ = chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=4)
    o16, s16 = chunk_gated_delta_rule(*(x.bfloat16() for x in (q, k, v, g, beta)), chunk_size=4)
    assert o16.dtype == torch.bfloat16 and s16.dtype == torch.float32
    torch.testing.assert_close(o16.double(), o64, atol=0.1, rtol=0.05)


@pytest.mark.parametrize("chunk", [4, 64])
@pytest.mark.parametrize("with_state", [False, True])
def test_equals_transformers_qwen3_next_reference(chunk: int, with_state: bool) -> None:
    """transformers' convention: g is log α, q/k L2-normalised inside with
    ``use_qk_l2norm_in_kernel`` (rsqrt(Σx² + 1e-6)), q scaled by K^-½ inside, state [B, H, K, V];
    it computes in float32, so the comparison is in float32 to 1e-5."""
    qwen = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
    reference = getattr(qwen, "torch_chunk_gated_delta_rule", None)
    if reference is None:
        pytest.skip("this transformers has no torch_chunk_gated_delta_rule")
    q, k, v, g, beta, state = (x.float() for x in _inputs(3))
    k = torch.randn_like(k)  # not normalised: the reference normalises
    s0 = state if with_state else None
    o_hf, s_hf = reference(
        q, k, v, g=g, beta=beta, chunk_size=chunk, initial_state=s0,
        output_final_state=True, use_qk_l2norm_in_kernel=True,
    )  # fmt: skip

    def l2(x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)

    o, s = chunk_gated_delta_rule(l2(q), l2(k), v, g, beta, chunk_size=chunk, initial_state=s0)
    torch.testing.assert_close(o, o_hf, atol=1e-5, rtol=0)
    torch.testing.assert_close(s, s_hf, atol=1e-5, rtol=0)


def test_gradients_of_the_chunked_form_equal_the_reference() -> None:
    """Training differentiates the chunked form (through its triangular solve)."""
    inputs = [x.requires_grad_() for x in _inputs(5)]
    q, k, v, g, beta, state = inputs
    o, s = naive_gated_delta_rule(q, k, v, g, beta, initial_state=state)
    ref = torch.autograd.grad((o.sum() + s.square().sum()), inputs)
    o, s = chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=5, initial_state=state)
    got = torch.autograd.grad((o.sum() + s.square().sum()), inputs)
    for a, b in zip(got, ref, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
