"""The attention of a block (``model/attention=standard|differential``).

Differential attention: Ye et al. 2024, "Differential Transformer" (arXiv:2410.05258), §2.1, and
their reference code (microsoft/unilm, Diff-Transformer/multihead_diffattn.py). Each head splits
its query and key into two halves and subtracts the second softmax map from the first, so noise
both maps share (attention paid to irrelevant context) cancels:

    DiffAttn(X) = (softmax(Q1 K1ᵀ / √d) − λ softmax(Q2 K2ᵀ / √d)) V,
    λ = exp(λq1 · λk1) − exp(λq2 · λk2) + λ_init,  λ_init = 0.8 − 0.6 · exp(−0.3 · (l − 1)),

l the 1-based layer of the stack (their ``lambda_init_fn(depth)``, depth 0-based). Each head's
output goes through an RMSNorm over its 2d channels (their "GroupNorm", ``subln``) and is scaled
by (1 − λ_init). The head layout is the paper's: a model configured with ``n_head`` = H keeps
standard attention's q, k, v and out matrices (the same parameter count) and runs H / 2
differential heads, each with two query/key maps of d = d_model / H channels and a value of 2d;
only λq1, λk1, λq2, λk2 [d] and the norm's weight [2d] are added per layer.

The maps are computed as H sub-heads (map m of head j is sub-head 2j + m), so SDPA, the KV cache,
the masks, sink tokens, a learned sink logit and soft-capping apply to each map as to a standard
head; each sub-head reads its pair's 2d-channel value and the two outputs are subtracted (linear,
so equal to subtracting the maps first). Dropout, when set, drops each map's probabilities before
the subtraction (the reference drops the difference).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from src.errors import ConfigError
from src.models.components.attention import (
    AttentionBias,
    MultiHeadAttention,
    explicit_attention,
    sdpa_attention,
)
from src.models.components.flex import flex_attend
from src.models.components.flops import attention_score_flops, linear_flops
from src.models.components.sinks import SinkKeys
from src.registry import Registry

ATTENTIONS: Registry[AttentionChoice] = Registry(
    "attention", conf="model/attention", package="src.models.components"
)


def lambda_init(layer: int) -> float:
    """Ye et al. 2024, §2.1: λ_init = 0.8 − 0.6 · exp(−0.3 · (l − 1)); ``layer`` is 0-based (l − 1)
    within its stack."""
    return 0.8 - 0.6 * math.exp(-0.3 * layer)


class AttentionChoice:
    """A configured attention; ``build(..., layer=i)`` makes the self-attention of block i."""

    #: For diagrams: what it changes (None: nothing).
    display: ClassVar[str | None] = None

    def build(self, *args: Any, layer: int = 0, **kwargs: Any) -> MultiHeadAttention:
        return MultiHeadAttention(*args, **kwargs)

    def describe(self) -> str | None:
        return self.display


@ATTENTIONS.register("standard")
class StandardAttention(AttentionChoice):
    """One softmax map per head (Vaswani et al. 2017): ``MultiHeadAttention`` as it is."""


@ATTENTIONS.register("differential")
class Differential(AttentionChoice):
    """Two softmax maps per head, subtracted with a learned λ (Ye et al. 2024)."""

    display = "differential attention (two maps per head, −λ)"

    @classmethod
    def check_args(cls, *, n_head: int = 2, n_kv_head: int | None = None, **_: object) -> None:
        """The paper's layout pairs the configured heads: ``n_head`` (and ``n_kv_head``) even."""
        for key, n in (("n_head", n_head), ("n_kv_head", n_kv_head)):
            if n is not None and n % 2:
                raise ConfigError(
                    f"model/attention=differential pairs the heads (two maps per head, Ye et al. "
                    f"2024): model.{key}={n} must be even"
                )

    def build(self, *args: Any, layer: int = 0, **kwargs: Any) -> MultiHeadAttention:
        return DifferentialAttention(*args, layer=layer, **kwargs)


class DifferentialAttention(MultiHeadAttention):
    """``MultiHeadAttention`` whose H heads are the two maps of H / 2 differential heads."""

    def __init__(self, *args: Any, layer: int = 0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        assert not self.cross, "differential attention is a self-attention"
        D = self.head_dim
        self.lambda_init = lambda_init(layer)
        # the reference's λq1, λk1, λq2, λk2 [d], drawn from N(0, 0.1²)
        self.lambda_q1 = nn.Parameter(torch.randn(D) * 0.1)
        self.lambda_k1 = nn.Parameter(torch.randn(D) * 0.1)
        self.lambda_q2 = nn.Parameter(torch.randn(D) * 0.1)
        self.lambda_k2 = nn.Parameter(torch.randn(D) * 0.1)
        self.head_norm = nn.RMSNorm(2 * D, eps=1e-5)  # per head, over its 2d channels

    def lam(self) -> Tensor:
        """λ = exp(λq1 · λk1) − exp(λq2 · λk2) + λ_init, a scalar shared by the layer's heads."""
        one = torch.exp(torch.dot(self.lambda_q1, self.lambda_k1).float())
        two = torch.exp(torch.dot(self.lambda_q2, self.lambda_k2).float())
        return one - two + self.lambda_init

    def forward_flops(
        self, batch_size: int, q_len: int, kv_len: int, window: int | None = None
    ) -> int:
        """Projections as standard; per sub-head (both maps) Q Kᵀ over d channels and P V over 2d
        (3/2 of a standard head's scores), then the subtraction over [B, H/2, T, 2d]."""
        B, H, D = batch_size, self.n_head, self.head_dim
        proj = linear_flops(self.qkv, B * q_len) + linear_flops(self.out, B * q_len)
        scores = 3 * attention_score_flops(B, H, q_len, kv_len, D, window) // 2
        return proj + scores + 2 * B * (H // 2) * q_len * 2 * D

    def _attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        bias: AttentionBias,
        need_weights: bool,
        sinks: SinkKeys | None,
    ) -> tuple[Tensor, Tensor | None]:
        """q: [B, H, T, d], k/v: [B, K, S, d] -> ([B, T, H·d], the H maps [B, H, T, S] or None)."""
        B, H, T, D = q.shape
        K, S = v.shape[1], v.shape[2]
        # value pairs: [B, K, S, d] -> [B, K/2, 2, S, d] -> [B, K/2, S, 2d]
        v = v.view(v.shape[0], K // 2, 2, S, D).permute(0, 1, 3, 2, 4)
        v = v.reshape(-1, K // 2, S, 2 * D)
        v = v.repeat_interleave(2, dim=1)  # each map's value: [B, K/2, S, 2d] -> [B, K, S, 2d]
        p = self.dropout if self.training else 0.0
        probs = None
        if bias.flex is not None and not need_weights:  # [B, H, T, 2d]
            y = flex_attend(q, k, v, bias.flex, self.scale, self.softcap, self.sink)
        elif need_weights or self.softcap is not None or self.sink is not None:
            if K != H:  # [B, K, S, ·] -> [B, H, S, ·]
                k, v = k.repeat_interleave(H // K, dim=1), v.repeat_interleave(H // K, dim=1)
            y, probs = explicit_attention(
                q, k, v, bias, p, self.training, self.scale, self.softcap, self.sink
            )
            probs = probs if need_weights else None
            if probs is not None and sinks is not None and not sinks.capturing:
                probs = probs[..., sinks.count :]  # the sequence's keys: [B, H, T, S]
        else:
            y = sdpa_attention(q, k, v, bias, p, self.training, self.scale)  # [B, H, T, 2d]
        y = y.view(B, H // 2, 2, T, 2 * D)  # [B, H, T, 2d] -> [B, H/2, 2 maps, T, 2d]
        y = y[:, :, 0] - self.lam().to(y.dtype) * y[:, :, 1]  # [B, H/2, T, 2d]
        y = self.head_norm(y) * (1 - self.lambda_init)
        # [B, H/2, T, 2d] -> [B, T, H/2, 2d] -> [B, T, H·d]
        return y.transpose(1, 2).reshape(B, T, H * D), probs
