"""Scaled dot-product attention on the article's hand-worked example, GQA/MQA, and the two paths.

The example (three tokens, d = 4, one head): x = [[1,0,1,0],[0,1,0,1],[1,1,0,0]],
Q = x·W_Q, K = x·W_K, V = x·W_V with W_V = I. For the third token t2 the scaled scores are
q2·k_j / √4 = (0.5, 0.5, 1.0), so softmax gives (0.27, 0.27, 0.45) and the output is
0.27·x0 + 0.27·x1 + 0.45·x2 = (0.73, 0.73, 0.27, 0.27).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

from src.models import build_model
from src.models.components.attention import (
    AttentionBias,
    MultiHeadAttention,
    explicit_attention,
    sdpa_attention,
)

X = torch.tensor([[1.0, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]])  # [T=3, C=4]
W_Q = torch.tensor([[1.0, 0, 0, 0], [0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1]])
W_K = torch.tensor([[1.0, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0], [0, 0, 0, 1]])
W_V = torch.eye(4)

# Exact values: row t2 is softmax(0.5, 0.5, 1.0); row t1 is softmax(0, 2) over the first two keys.
A = math.exp(0.5) / (2 * math.exp(0.5) + math.exp(1.0))
P_T2 = torch.tensor([A, A, 1 - 2 * A])
P_T1 = torch.tensor([1 / (1 + math.exp(2)), math.exp(2) / (1 + math.exp(2)), 0.0])


def qkv() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The example's Q, K, V as [B=1, H=1, T=3, D=4]."""
    return (X @ W_Q)[None, None], (X @ W_K)[None, None], (X @ W_V)[None, None]


def test_hand_worked_example_explicit_causal() -> None:
    q, k, v = qkv()
    out, probs = explicit_attention(q, k, v, AttentionBias(is_causal=True))
    # The article's figures, to two decimals.
    torch.testing.assert_close(probs[0, 0, 2], torch.tensor([0.27, 0.27, 0.45]), atol=0.005, rtol=0)
    torch.testing.assert_close(
        out[0, 0, 2], torch.tensor([0.73, 0.73, 0.27, 0.27]), atol=0.005, rtol=0
    )
    # And exactly.
    torch.testing.assert_close(probs[0, 0, 2], P_T2)
    torch.testing.assert_close(probs[0, 0, 1], P_T1)
    torch.testing.assert_close(probs[0, 0, 0], torch.tensor([1.0, 0, 0]))
    torch.testing.assert_close(out[0, 0, 2], P_T2 @ X)
    assert torch.equal(probs[0, 0].triu(1), torch.zeros(3, 3))  # causal: nothing above the diagonal
    torch.testing.assert_close(probs.sum(-1), torch.ones(1, 1, 3))


@pytest.mark.parametrize(
    "bias",
    [
        AttentionBias(is_causal=True),
        AttentionBias(mask=torch.ones(3, 3, dtype=torch.bool).tril()[None, None]),
    ],
    ids=["is_causal", "bool_mask"],
)
def test_hand_worked_example_sdpa_matches_explicit(bias: AttentionBias) -> None:
    q, k, v = qkv()
    out_explicit, _ = explicit_attention(q, k, v, bias)
    out_sdpa = sdpa_attention(q, k, v, bias)
    torch.testing.assert_close(out_sdpa, out_explicit, atol=1e-6, rtol=0)


def example_module() -> MultiHeadAttention:
    """A 1-head MultiHeadAttention carrying the example's matrices.

    nn.Linear computes x·Wᵀ + b, so its weight is the transpose of the matrix that
    multiplies x on the right: qkv.weight = [W_Q | W_K | W_V]ᵀ, shape [3·4, 4].
    """
    mha = MultiHeadAttention(d_model=4, n_head=1, n_kv_head=1, bias=False)
    with torch.no_grad():
        mha.qkv.weight.copy_(torch.cat([W_Q, W_K, W_V], dim=1).T)  # [4, 12] -> [12, 4]
        mha.out.weight.copy_(torch.eye(4))
    return mha


@pytest.mark.parametrize("need_weights", [True, False], ids=["explicit", "sdpa"])
def test_hand_worked_example_through_module(need_weights: bool) -> None:
    mha = example_module()
    o = mha(X[None], AttentionBias(is_causal=True), need_weights=need_weights)
    torch.testing.assert_close(
        o.out[0, 2], torch.tensor([0.73, 0.73, 0.27, 0.27]), atol=0.005, rtol=0
    )
    torch.testing.assert_close(o.out[0], torch.stack([X[0], P_T1 @ X, P_T2 @ X]), atol=1e-6, rtol=0)
    if need_weights:
        assert o.probs is not None and o.probs.shape == (1, 1, 3, 3)  # [B, H, T, S]
        torch.testing.assert_close(o.probs[0, 0, 2], P_T2)
    else:
        assert o.probs is None


def test_bidirectional_example_differs_only_above_diagonal() -> None:
    """Without the causal mask t0 and t1 also see later tokens; t2 (last) is unchanged."""
    q, k, v = qkv()
    _, causal = explicit_attention(q, k, v, AttentionBias(is_causal=True))
    _, full = explicit_attention(q, k, v, AttentionBias())
    torch.testing.assert_close(full[0, 0, 2], causal[0, 0, 2])
    above = torch.ones(3, 3, dtype=torch.bool).triu(1)
    assert (full[0, 0][above] > 0).all()


@pytest.mark.parametrize("n_kv_head", [4, 2, 1], ids=["mha", "gqa", "mqa"])
def test_gqa_mqa_shapes_and_paths(n_kv_head: int) -> None:
    B, T, C, H = 2, 5, 32, 4
    D = C // H
    mha = MultiHeadAttention(C, H, n_kv_head).eval()
    assert mha.qkv.weight.shape == (H * D + 2 * n_kv_head * D, C)  # [(H + 2K)·D, C]
    assert mha.out.weight.shape == (C, H * D)
    x = torch.randn(B, T, C)
    o_explicit = mha(x, AttentionBias(is_causal=True), need_weights=True)
    o_sdpa = mha(x, AttentionBias(is_causal=True))
    assert o_explicit.out.shape == o_sdpa.out.shape == (B, T, C)
    assert o_explicit.probs is not None and o_explicit.probs.shape == (
        B,
        H,
        T,
        T,
    )  # one map per query head
    torch.testing.assert_close(o_sdpa.out, o_explicit.out, atol=1e-6, rtol=1e-5)


def test_gqa_equals_mha_with_shared_kv_heads() -> None:
    """GQA with K groups is MHA whose K/V heads are repeated within each group (Ainslie et al. 2023)."""
    C, H, K = 32, 4, 2
    D, rep = C // H, H // K
    gqa = MultiHeadAttention(C, H, K).eval()
    mha = MultiHeadAttention(C, H, H).eval()
    wq, wk, wv = gqa.qkv.weight.split([H * D, K * D, K * D])  # [H·D, C], [K·D, C], [K·D, C]
    bq, bk, bv = gqa.qkv.bias.split([H * D, K * D, K * D])

    def repeat(
        w: torch.Tensor,
    ) -> torch.Tensor:  # [K·D, ...] -> [K, D, ...] -> [H, D, ...] -> [H·D, ...]
        return w.view(K, D, *w.shape[1:]).repeat_interleave(rep, dim=0).reshape(H * D, *w.shape[1:])

    with torch.no_grad():
        mha.qkv.weight.copy_(torch.cat([wq, repeat(wk), repeat(wv)]))
        mha.qkv.bias.copy_(torch.cat([bq, repeat(bk), repeat(bv)]))
        mha.out.load_state_dict(gqa.out.state_dict())
    x = torch.randn(2, 6, C)
    torch.testing.assert_close(
        gqa(x, AttentionBias(is_causal=True)).out, mha(x, AttentionBias(is_causal=True)).out
    )
    assert sum(p.numel() for p in gqa.parameters()) < sum(p.numel() for p in mha.parameters())


def test_cross_attention_shapes() -> None:
    B, T, S, C, H = 2, 3, 7, 32, 4
    cross = MultiHeadAttention(C, H, 2, cross=True).eval()
    o = cross(torch.randn(B, T, C), AttentionBias(), memory=torch.randn(B, S, C), need_weights=True)
    assert o.out.shape == (B, T, C)
    assert o.probs is not None and o.probs.shape == (B, H, T, S)
    torch.testing.assert_close(o.probs.sum(-1), torch.ones(B, H, T))


def test_invalid_head_counts_raise(make_tiny_config: Callable[..., dict[str, Any]]) -> None:
    """The attention's own rule (``check_args``), run once when the model config is made."""
    with pytest.raises(ValueError, match="not divisible by model.n_head"):
        MultiHeadAttention.check_args(d_model=30, n_head=4, n_kv_head=4)
    with pytest.raises(ValueError, match="not divisible by model.n_kv_head"):
        MultiHeadAttention.check_args(d_model=32, n_head=4, n_kv_head=3)
    with pytest.raises(ValueError, match="not divisible by model.n_head"):
        build_model(make_tiny_config(d_model=30, n_head=4))
