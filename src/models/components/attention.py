"""Multi-head attention: self (causal / bidirectional / prefix) and cross, with GQA/MQA.

Vaswani et al. 2017, §3.2: Attention(Q, K, V) = softmax(Q Kᵀ / √D) V. Dividing by √D
keeps the scores' variance near 1 whatever the head size, so softmax does not saturate.
Grouped-query attention (Ainslie et al. 2023) shares each K/V head among H/K query heads;
K = 1 is multi-query attention (Shazeer 2019).

Two numerically equivalent paths:

* ``sdpa`` — ``F.scaled_dot_product_attention`` (flash / memory-efficient kernels on GPU);
* ``explicit`` — the textbook formula, which can also return the probabilities
  [B, H, T, S] for analysis (``need_weights=True``).

Cross-attention (encoder-decoder): Q comes from the decoder stream, K and V from the
encoder output (``memory``).

Soft-capping (``model.attn_softcap``, Gemma 2) bends the scores through cap · tanh(s / cap) before
the mask; SDPA's kernels cannot, so a capped attention always takes the explicit path (the
T × S scores are materialised: more memory, no flash kernel). A learned sink logit per head
(``model/sinks=learned``, ``components/sinks.py``, gpt-oss) joins the softmax's denominator: the
explicit path again, whose probabilities then sum to less than 1. ``model.attn_kernel=flex``
(``components/flex.py``) runs every self-attention pattern, caps and sinks included, through
FlexAttention instead; probabilities (``need_weights``) still take the explicit path.

Two seams for other architectures: ``head_dim`` (``model.d_head``) need not be d_model / H
(T5's ``d_kv``, Qwen 3's ``head_dim``), and ``scale`` (``model.attn_scale``) replaces 1/√D (T5
does not scale: Mesh TensorFlow folds it into the initialisation of Q). A QK-norm
(``model/qk_norm``, ``components/qk_norm.py``) normalises the projected q and k before the
position's ``rotate``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from src.errors import ConfigError
from src.models.components.flex import FlexBias, flex_attend
from src.models.components.flops import attention_score_flops, linear_flops
from src.models.components.kv_cache import KVCache
from src.models.components.positions import Position
from src.models.components.qk_norm import QKNorm
from src.models.components.sinks import SinkKeys, SinkLogit, Sinks


@dataclass
class AttentionBias:
    """What a stack computes once per forward and every layer reuses.

    ``mask``: None, a boolean [B|1, 1, T, S] (True = attend) or an additive float
    [B|1, H|1, T, S]; ``is_causal``: the kernel may apply its own causal mask (then
    ``mask`` is None); ``flex``: the same pattern as a BlockMask (``model.attn_kernel=flex``,
    components/flex.py), which then replaces ``mask`` and ``is_causal``.
    """

    mask: Tensor | None = None
    is_causal: bool = False
    flex: FlexBias | None = None


@dataclass
class AttentionOutput:
    out: Tensor  # [B, T, C]
    probs: Tensor | None = None  # [B, H, T, S] when asked for


def explicit_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    bias: AttentionBias,
    dropout: float = 0.0,
    training: bool = False,
    scale: float | None = None,
    softcap: float | None = None,
    sink: SinkLogit | None = None,
) -> tuple[Tensor, Tensor]:
    """q: [B, H, T, D], k/v: [B, H, S, D] -> (out [B, H, T, D], probs [B, H, T, S]); ``scale`` None
    = 1/√D; ``softcap``: cap · tanh(scores / cap) before the mask (Gemma 2, §2); ``sink``: a logit
    per head in the softmax's denominator (gpt-oss), so a row sums to 1 less the sink's share."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale  # [B, H, T, S]
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)
    if bias.is_causal:
        T, S = scores.shape[-2:]
        keep = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(S - T)
        scores = scores.masked_fill(~keep, float("-inf"))
    if bias.mask is not None:
        if bias.mask.dtype == torch.bool:
            scores = scores.masked_fill(~bias.mask, float("-inf"))
        else:
            scores = scores + bias.mask
    probs = (scores.float().softmax(dim=-1) if sink is None else sink(scores)).to(q.dtype)
    probs = torch.nan_to_num(probs)  # rows with no visible key (padding queries) -> 0
    out = F.dropout(probs, dropout, training) @ v  # [B, H, T, S] @ [B, H, S, D] -> [B, H, T, D]
    return out, probs


def sdpa_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    bias: AttentionBias,
    dropout: float = 0.0,
    training: bool = False,
    scale: float | None = None,
) -> Tensor:
    """Same contract as ``explicit_attention`` without the probabilities; K/V heads may be fewer."""
    gqa = k.shape[1] != q.shape[1]
    return F.scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=bias.mask,
        dropout_p=dropout if training else 0.0,
        is_causal=bias.is_causal,
        enable_gqa=gqa,
        scale=scale,
    )


class MultiHeadAttention(nn.Module):
    """Multi-head attention with ``n_kv_head`` K/V heads (= ``n_head`` for classic MHA).

    Self-attention projects Q, K, V with one fused matrix [C -> (H + 2K)·D]; cross-attention
    projects Q from the decoder and K, V (fused) from the encoder memory.
    """

    def __init__(
        self,
        d_model: int,
        n_head: int,
        n_kv_head: int,
        bias: bool = True,
        dropout: float = 0.0,
        cross: bool = False,
        *,
        head_dim: int | None = None,
        scale: float | None = None,
        qk_norm: QKNorm | None = None,
        softcap: float | None = None,
        sinks: Sinks | None = None,
    ) -> None:
        super().__init__()
        self.n_head, self.n_kv_head = n_head, n_kv_head
        self.softcap = softcap  # SDPA cannot cap the scores: the explicit path then runs
        # a learned sink logit per head (None without it); the explicit path again
        self.sink = sinks.build(n_head) if sinks is not None else None
        self.head_dim = d_model // n_head if head_dim is None else head_dim
        self.cross, self.dropout, self.scale = cross, dropout, scale
        q_dim, kv_dim = n_head * self.head_dim, n_kv_head * self.head_dim
        if cross:
            self.q = nn.Linear(d_model, q_dim, bias=bias)
            self.kv = nn.Linear(d_model, 2 * kv_dim, bias=bias)
        else:
            self.qkv = nn.Linear(d_model, q_dim + 2 * kv_dim, bias=bias)
        self.out = nn.Linear(q_dim, d_model, bias=bias)
        self.out_dropout = nn.Dropout(dropout)
        # QK-norm on the projections [B, T, H·D] / [B, S, K·D] (None without it)
        self.q_norm = qk_norm.build(n_head) if qk_norm is not None else None
        self.k_norm = qk_norm.build(n_kv_head) if qk_norm is not None else None

    @classmethod
    def check_args(
        cls,
        *,
        d_model: int,
        n_head: int,
        n_kv_head: int | None,
        head_dim: int | None = None,
        scale: float | None = None,
        **_: object,
    ) -> None:
        """Head counts that split ``d_model`` (``n_kv_head`` None = ``n_head``) unless ``head_dim``
        is given; a positive ``head_dim`` and a positive, finite ``scale``."""
        if head_dim is not None and (
            isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 1
        ):
            raise ConfigError(
                f"model.d_head={head_dim!r} must be a positive integer (channels per head), or "
                "null for d_model / n_head"
            )
        if scale is not None and (
            isinstance(scale, bool)
            or not isinstance(scale, (int, float))
            or not 0 < scale < math.inf
        ):
            raise ConfigError(
                f"model.attn_scale={scale!r} must be a positive number (scores = scale · q·k), or "
                "null for 1/√d_head (T5 uses 1.0)"
            )
        if head_dim is None and d_model % n_head:
            raise ConfigError(
                f"model.d_model={d_model} is not divisible by model.n_head={n_head}; choose n_head "
                f"among the divisors of d_model (e.g. {d_model // 64 or 1} for 64-dim heads)"
            )
        if n_kv_head is not None and (
            isinstance(n_kv_head, bool)
            or not isinstance(n_kv_head, int)
            or n_kv_head < 1
            or n_kv_head > n_head
        ):
            raise ConfigError(
                f"model.n_kv_head={n_kv_head!r} is invalid: use null (= n_head: multi-head), 1 "
                f"(multi-query) or a divisor of model.n_head={n_head}"
            )
        if n_head % (n_kv_head or n_head):
            raise ConfigError(
                f"model.n_head={n_head} is not divisible by model.n_kv_head={n_kv_head}; n_kv_head "
                "must divide n_head (n_kv_head=1 is multi-query, n_kv_head=n_head is multi-head)"
            )

    def forward_flops(
        self, batch_size: int, q_len: int, kv_len: int, window: int | None = None
    ) -> int:
        """Projections (Q, K, V, out) and scores of one forward: ``q_len`` queries over ``kv_len``
        keys (the encoder output's length for cross-attention; a sliding ``window``: the keys each
        query sees)."""
        B = batch_size
        if self.cross:
            proj = linear_flops(self.q, B * q_len) + linear_flops(self.kv, B * kv_len)
        else:
            proj = linear_flops(self.qkv, B * q_len)
        proj += linear_flops(self.out, B * q_len)
        return proj + attention_score_flops(B, self.n_head, q_len, kv_len, self.head_dim, window)

    def _heads(self, x: Tensor, n: int) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, n, self.head_dim).transpose(1, 2)  # [B, T, n·D] -> [B, n, T, D]

    def _project_kv(self, src: Tensor) -> tuple[Tensor, Tensor]:
        # [B, S, 2·K·D] -> 2 × [B, S, K·D]
        k, v = self.kv(src).split(self.n_kv_head * self.head_dim, dim=-1)
        if self.k_norm is not None:
            k = self.k_norm(k)
        return self._heads(k, self.n_kv_head), self._heads(v, self.n_kv_head)

    def projection_weights(self) -> dict[str, Tensor]:
        """The q, k, v and out matrices as views ([rows, C]; rows of the fused ``qkv`` / ``kv``),
        for initialisation schemes that treat them apart (DeepNet)."""
        qd, kd = self.n_head * self.head_dim, self.n_kv_head * self.head_dim
        if self.cross:
            k, v = self.kv.weight.split(kd)
            return {"q": self.q.weight, "k": k, "v": v, "out": self.out.weight}
        q, k, v = self.qkv.weight.split([qd, kd, kd])
        return {"q": q, "k": k, "v": v, "out": self.out.weight}

    def tensor_parallel_plan(self, tp: int) -> dict[str, Any]:
        """Megatron's split of a self-attention over ``tp`` ranks (Shoeybi et al. 2019, §3): q, k
        and v column-wise by heads (the fused ``qkv`` as three equal blocks), the output
        projection row-wise; each rank attends with its H / tp heads (``shard_heads``).
        A ``ConfigError`` naming the key where this attention cannot be split so."""
        from src.models.components.tensor_parallel import (
            FusedColwiseParallel,
            LocalHeads,
            RowwiseParallel,
        )

        why = None
        if type(self) is not MultiHeadAttention:
            why = f"{type(self).__name__} (model/attention) has no split; use model/attention=standard"
        elif self.cross:
            why = "cross-attention has no split; use model.family=decoder_only"
        elif self.n_head % tp:
            why = f"model.n_head={self.n_head} is not divisible by it; choose a divisor of n_head"
        elif self.n_kv_head != self.n_head:
            why = (
                f"model.n_kv_head={self.n_kv_head}: grouped-query attention's fused qkv has a q "
                "block larger than its k and v blocks, which the split by heads does not cover; "
                "use model.n_kv_head=null"
            )
        elif self.sink is not None:
            why = (
                "model/sinks keeps a sink logit per head, which is not split; use model/sinks=none"
            )
        elif self.q_norm is not None:
            why = "model/qk_norm is not split by heads; use model/qk_norm=none"
        if why is not None:
            raise ConfigError(f"trainer.tensor_parallel={tp}: {why}, or trainer.tensor_parallel=1")
        # "": this module itself
        return {"qkv": FusedColwiseParallel(parts=3), "out": RowwiseParallel(), "": LocalHeads()}

    def shard_heads(self, tp: int) -> None:
        """Under the plan's sharding (``LocalHeads``): this rank projects and attends with its
        H / tp heads."""
        self.n_head, self.n_kv_head = self.n_head // tp, self.n_kv_head // tp

    def forward(
        self,
        x: Tensor,
        bias: AttentionBias,
        *,
        position: Position | None = None,
        positions: Tensor | None = None,
        memory: Tensor | None = None,
        cache: KVCache | None = None,
        layer_idx: int = 0,
        need_weights: bool = False,
        sinks: SinkKeys | None = None,
    ) -> AttentionOutput:
        """x: [B, T, C]; memory: [B, S, C] (cross only) -> AttentionOutput(out [B, T, C]);
        ``sinks``: sink tokens' keys to prepend (or to record, while the stack computes them)."""
        B, T, C = x.shape
        if self.cross:
            q = self.q(x)  # [B, T, H·D]
            # [B, H, T, D]
            q = self._heads(q if self.q_norm is None else self.q_norm(q), self.n_head)
            if cache is not None and cache.cross[layer_idx] is not None:
                k, v = cache.cross[layer_idx]  # type: ignore[misc]
            else:
                assert memory is not None, "cross-attention needs the encoder output (memory)"
                k, v = self._project_kv(memory)  # [B, K, S, D]
                if cache is not None:
                    cache.cross[layer_idx] = (k, v)
        else:
            q, k, v = self.qkv(x).split(
                [
                    self.n_head * self.head_dim,
                    self.n_kv_head * self.head_dim,
                    self.n_kv_head * self.head_dim,
                ],
                dim=-1,
            )
            # QK-norm on [B, T, H·D] and [B, T, K·D], before the rotation
            if self.q_norm is not None:
                q, k = self.q_norm(q), self.k_norm(k)  # type: ignore[misc]
            q, k, v = (
                self._heads(q, self.n_head),
                self._heads(k, self.n_kv_head),
                self._heads(v, self.n_kv_head),
            )
            if position is not None:
                # the new tokens, at their own positions
                q, k = position.rotate(q, k, positions, positions)
            if cache is not None:
                k, v = cache.update(layer_idx, k, v)  # [B, K, offset+T, D]
            if sinks is not None:  # [B, K, S, D] -> [B, K, n + S, D]
                k, v, bias = sinks.prepend(layer_idx, k, v, bias, T)

        y, probs = self._attend(q, k, v, bias, need_weights, sinks)  # [B, T, H·D]
        return AttentionOutput(out=self.out_dropout(self.out(y)), probs=probs)

    def _attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        bias: AttentionBias,
        need_weights: bool,
        sinks: SinkKeys | None,
    ) -> tuple[Tensor, Tensor | None]:
        """q: [B, H, T, D], k/v: [B, K, S, D] -> ([B, T, H·D], probs [B, H, T, S] or None); the
        seam ``model/attention=differential`` overrides (``components/differential.py``)."""
        B, _, T, _ = q.shape
        p = self.dropout if self.training else 0.0
        probs = None
        if bias.flex is not None and not need_weights:  # caps and sink logits included
            y = flex_attend(q, k, v, bias.flex, self.scale, self.softcap, self.sink)
        elif need_weights or self.softcap is not None or self.sink is not None:
            if self.n_kv_head != self.n_head:  # [B, K, S, D] -> [B, H, S, D]
                rep = self.n_head // self.n_kv_head
                k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            y, probs = explicit_attention(
                q, k, v, bias, p, self.training, self.scale, self.softcap, self.sink
            )
            probs = probs if need_weights else None
            if probs is not None and sinks is not None and not sinks.capturing:
                probs = probs[..., sinks.count :]  # the sequence's keys: [B, H, T, S]
        else:
            y = sdpa_attention(q, k, v, bias, p, self.training, self.scale)
        # [B, H, T, D] -> [B, T, H·D]
        return y.transpose(1, 2).reshape(B, T, self.n_head * self.head_dim), probs
