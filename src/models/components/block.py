"""One Transformer block and a stack of them.

::

    decoder-only / encoder block          encoder-decoder decoder block
    x ─┬─ norm? ─ self-attn ─ (+) ─┐      x ─ [self-attn] ─ [cross-attn: Q←x, K/V←memory] ─ [FFN]
       └────────────────────────┘
    x ─┬─ norm? ─ FFN ─────── (+) ─┐      each [·] is a residual sublayer whose norm sits
       └────────────────────────┘      before it (pre) or after the add (post)
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from src.models.components.attention import AttentionBias, MultiHeadAttention
from src.models.components.kv_cache import KVCache
from src.models.components.masks import AttentionMask
from src.models.components.positions import Position
from src.models.components.residual import Placement


class Block(nn.Module):
    def __init__(
        self,
        d_model: int,
        n_head: int,
        n_kv_head: int,
        make_norm: Callable[[], nn.Module],
        make_ffn: Callable[[], nn.Module],
        placement: Placement,
        bias: bool = True,
        dropout: float = 0.0,
        cross_attention: bool = False,
    ) -> None:
        super().__init__()
        self.placement = placement
        self.attn_norm = make_norm()
        self.attn = MultiHeadAttention(d_model, n_head, n_kv_head, bias, dropout)
        if cross_attention:
            self.cross_norm = make_norm()
            self.cross_attn = MultiHeadAttention(d_model, n_head, n_kv_head, bias, dropout, cross=True)
        self.ffn_norm = make_norm()
        self.ffn = make_ffn()

    def forward(
        self,
        x: Tensor,
        self_bias: AttentionBias,
        *,
        position: Position,
        positions: Tensor,
        memory: Tensor | None = None,
        memory_bias: AttentionBias | None = None,
        cache: KVCache | None = None,
        layer_idx: int = 0,
        need_weights: bool = False,
    ) -> tuple[Tensor, list[Tensor]]:
        """x: [B, T, C] -> ([B, T, C], attention probabilities when asked for)."""
        probs: list[Tensor] = []

        def self_attn(h: Tensor) -> Tensor:
            o = self.attn(h, self_bias, position=position, positions=positions, cache=cache, layer_idx=layer_idx, need_weights=need_weights)
            if o.probs is not None:
                probs.append(o.probs)
            return o.out

        x = self.placement(x, self.attn_norm, self_attn)
        if hasattr(self, "cross_attn"):

            def cross_attn(h: Tensor) -> Tensor:
                o = self.cross_attn(h, memory_bias, memory=memory, cache=cache, layer_idx=layer_idx, need_weights=need_weights)
                if o.probs is not None:
                    probs.append(o.probs)
                return o.out

            x = self.placement(x, self.cross_norm, cross_attn)
        x = self.placement(x, self.ffn_norm, self.ffn)
        return x, probs


@dataclass
class StackOutput:
    hidden: Tensor  # [B, T, C] after the final norm (if any)
    attentions: list[Tensor] = field(default_factory=list)  # per layer [B, H, T, S] (self, then cross)


def build_bias(
    mask: AttentionMask | None,
    positions: Tensor,
    key_positions: Tensor,
    key_padding: Tensor | None,
    prefix_length: Tensor | None,
    score_bias: Tensor | None,
    dtype: torch.dtype,
) -> AttentionBias:
    """Combine structural mask, padding and position score bias into one AttentionBias.

    positions: [T] query indices; key_positions: [S]; key_padding: [B, S] (1 = real token).
    """
    T, S = positions.shape[0], key_positions.shape[0]
    if mask is not None and mask.causal and key_padding is None and score_bias is None and prefix_length is None:
        if T == S:
            return AttentionBias(is_causal=True)  # kernel's own causal mask (flash-eligible)
        if T == 1:
            return AttentionBias()  # one new token sees the whole cache
    allowed = mask.allowed(positions, key_positions, prefix_length) if mask is not None else None  # [1|B, T, S]
    if allowed is not None:
        allowed = allowed[:, None]  # [1|B, T, S] -> [1|B, 1, T, S]
    if key_padding is not None:
        pad = key_padding.bool()[:, None, None, :]  # [B, S] -> [B, 1, 1, S]
        allowed = pad if allowed is None else allowed & pad
    if score_bias is None:
        return AttentionBias(mask=allowed)
    add = score_bias.to(dtype)  # [H, T, S]
    add = add[None] if add.dim() == 3 else add  # [1|B, H, T, S]
    if allowed is not None:
        add = add.masked_fill(~allowed, torch.finfo(dtype).min)
    return AttentionBias(mask=add)


class Stack(nn.Module):
    """Position hook 1, optional embedding norm, dropout, N blocks, optional final norm."""

    def __init__(
        self,
        blocks: list[Block],
        position: Position,
        mask: AttentionMask | None,
        final_norm: nn.Module | None,
        embed_norm: nn.Module | None = None,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.position = position
        self.mask = mask
        self.embed_norm = embed_norm
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(blocks)
        self.final_norm = final_norm

    def forward(
        self,
        x: Tensor,
        *,
        key_padding: Tensor | None = None,
        prefix_length: Tensor | None = None,
        memory: Tensor | None = None,
        memory_padding: Tensor | None = None,
        cache: KVCache | None = None,
        need_weights: bool = False,
    ) -> StackOutput:
        """x: token embeddings [B, T, C]; key_padding: [B, offset+T]; memory: [B, S, C]."""
        B, T, _ = x.shape
        offset = cache.offset if cache is not None else 0
        positions = torch.arange(offset, offset + T, device=x.device)  # [T]
        key_positions = torch.arange(0, offset + T, device=x.device)  # [S]
        self.position.check_length(offset + T)
        x = self.position.add_to_embeddings(x, positions)
        if self.embed_norm is not None:
            x = self.embed_norm(x)
        x = self.dropout(x)
        self_bias = build_bias(
            self.mask, positions, key_positions, key_padding, prefix_length,
            self.position.score_bias(positions, key_positions), x.dtype,
        )
        memory_bias = None
        if memory is not None or (cache is not None and cache.cross[0] is not None):
            memory_bias = build_bias(None, positions, positions, memory_padding, None, None, x.dtype)
        attentions: list[Tensor] = []
        for i, block in enumerate(self.blocks):
            x, probs = block(
                x, self_bias, position=self.position, positions=positions, memory=memory,
                memory_bias=memory_bias, cache=cache, layer_idx=i, need_weights=need_weights,
            )
            attentions.extend(probs)
        if self.final_norm is not None:
            x = self.final_norm(x)
        if cache is not None:
            cache.advance(T)
        return StackOutput(hidden=x, attentions=attentions)
