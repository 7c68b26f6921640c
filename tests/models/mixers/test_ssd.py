"""Mamba-2's SSD in three forms agrees (float64, 1e-5), chunk sizes that do and do not divide T,
with and without an initial state, groups of B/C; the chunked form equals transformers'
``mamba2_chunk_scan`` (its torch path)."""

from __future__ import annotations

import pytest
import torch

from src.models.mixers.ssd import ssd_chunked, ssd_naive, ssd_recurrent

B, T, H, P, G, N = 2, 13, 4, 3, 2, 5


def _inputs(seed: int = 0, dtype: torch.dtype = torch.float64, groups: int = G):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, H, P, generator=gen, dtype=dtype)
    dt = torch.nn.functional.softplus(torch.randn(B, T, H, generator=gen, dtype=dtype))
    A = -torch.rand(H, generator=gen, dtype=dtype) - 0.1
    Bm = torch.randn(B, T, groups, N, generator=gen, dtype=dtype)
    Cm = torch.randn(B, T, groups, N, generator=gen, dtype=dtype)
    state = torch.randn(B, H, P, N, generator=gen, dtype=dtype)
    return x, dt, A, Bm, Cm, state


@pytest.mark.parametrize("groups", [1, G, H])
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("chunk", [1, 3, 8, T, 5, 16])
def test_three_forms_agree(chunk: int, with_state: bool, groups: int) -> None:
    x, dt, A, Bm, Cm, state = _inputs(groups=groups)
    s0 = state if with_state else None
    y_ref, h_ref = ssd_naive(x, dt, A, Bm, Cm, initial_state=s0)
    y_rec, h_rec = ssd_recurrent(x, dt, A, Bm, Cm, initial_state=s0)
    y_chk, h_chk = ssd_chunked(x, dt, A, Bm, Cm, chunk_size=chunk, initial_state=s0)
    assert y_ref.shape == (B, T, H, P) and h_ref.shape == (B, H, P, N)
    for y, h in ((y_rec, h_rec), (y_chk, h_chk)):
        torch.testing.assert_close(y, y_ref, atol=1e-5, rtol=0)
        torch.testing.assert_close(h, h_ref, atol=1e-5, rtol=0)


def test_the_recurrence_by_hand() -> None:
    """One head, one group, two steps written out: h1 = Δ1 x1 B1ᵀ, h2 = e^{Δ2 A} h1 + Δ2 x2 B2ᵀ."""
    x, dt, A, Bm, Cm, _ = _inputs(4, groups=1)
    x, dt, A, Bm, Cm = x[:1, :2, :1], dt[:1, :2, :1], A[:1], Bm[:1, :2], Cm[:1, :2]
    h1 = dt[0, 0, 0] * torch.outer(x[0, 0, 0], Bm[0, 0, 0])
    h2 = torch.exp(dt[0, 1, 0] * A[0]) * h1 + dt[0, 1, 0] * torch.outer(x[0, 1, 0], Bm[0, 1, 0])
    y, h = ssd_chunked(x, dt, A, Bm, Cm, chunk_size=2)
    torch.testing.assert_close(y[0, :, 0], torch.stack([h1 @ Cm[0, 0, 0], h2 @ Cm[0, 1, 0]]))
    torch.testing.assert_close(h[0, 0], h2)


def test_splitting_the_sequence_carries_the_state() -> None:
    x, dt, A, Bm, Cm, _ = _inputs(1)
    y, h = ssd_chunked(x, dt, A, Bm, Cm, chunk_size=4)
    cut = 7
    y1, h1 = ssd_chunked(x[:, :cut], dt[:, :cut], A, Bm[:, :cut], Cm[:, :cut], chunk_size=4)
    y2, h2 = ssd_recurrent(x[:, cut:], dt[:, cut:], A, Bm[:, cut:], Cm[:, cut:], initial_state=h1)
    torch.testing.assert_close(torch.cat([y1, y2], 1), y, atol=1e-10, rtol=0)
    torch.testing.assert_close(h2, h, atol=1e-10, rtol=0)


@pytest.mark.parametrize("chunk", [4, 16])
@pytest.mark.parametrize("with_state", [False, True])
def test_equals_transformers_mamba2_chunk_scan(chunk: int, with_state: bool) -> None:
    """transformers' torch path (``mamba2_chunk_scan``, no D, Δ already positive) in float32."""
    mamba2 = pytest.importorskip("transformers.models.mamba2.modeling_mamba2")
    x, dt, A, Bm, Cm, state = (t.float() for t in _inputs(2))
    s0 = state if with_state else None
    y_hf, h_hf = mamba2.mamba2_chunk_scan(
        x, dt, A, Bm, Cm, chunk_size=chunk, initial_states=s0, return_final_states=True
    )
    y, h = ssd_chunked(x, dt, A, Bm, Cm, chunk_size=chunk, initial_state=s0)
    torch.testing.assert_close(y, y_hf, atol=1e-5, rtol=0)
    torch.testing.assert_close(h, h_hf, atol=1e-5, rtol=0)


def test_gradients_of_the_chunked_form_equal_the_reference() -> None:
    inputs = [x.requires_grad_() for x in _inputs(5)]
    x, dt, A, Bm, Cm, state = inputs
    y, h = ssd_naive(x, dt, A, Bm, Cm, initial_state=state)
    ref = torch.autograd.grad(y.sum() + h.square().sum(), inputs)
    y, h = ssd_chunked(x, dt, A, Bm, Cm, chunk_size=5, initial_state=state)
    got = torch.autograd.grad(y.sum() + h.square().sum(), inputs)
    for a, b in zip(got, ref, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
