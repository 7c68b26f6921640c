"""One Transformer block and a stack of them.

::

    decoder-only / encoder block          encoder-decoder decoder block
    x ─┬─ norm? ─ self-attn ─ (+) ─┐      x ─ [self-attn] ─ [cross-attn: Q←x, K/V←memory] ─ [FFN]
       └────────────────────────┘
    x ─┬─ norm? ─ FFN ─────── (+) ─┐      each [·] is a residual sublayer whose norm sits
       └────────────────────────┘      where its placement puts it (residual.py)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from src.models.components.attention import AttentionBias, MultiHeadAttention
from src.models.components.differential import AttentionChoice, StandardAttention
from src.models.components.documents import document_positions, same_document
from src.models.components.ffn import NoFFN
from src.models.components.flex import flex_bias
from src.models.components.flops import attention_score_flops, linear_flops
from src.models.components.kv_cache import KVCache
from src.models.components.masks import AttentionMask
from src.models.components.positions import Position
from src.models.components.qk_norm import QKNorm
from src.models.components.residual import Residual
from src.models.components.sinks import SinkKeys, Sinks
from src.models.mixers.base import SequenceMixer


class Block(nn.Module):
    def __init__(
        self,
        d_model: int,
        n_head: int,
        n_kv_head: int,
        make_norm: Callable[[], nn.Module],
        make_ffn: Callable[[], nn.Module],
        make_residual: Callable[[], Residual],
        bias: bool = True,
        dropout: float = 0.0,
        cross_attention: bool = False,
        *,
        head_dim: int | None = None,
        attn_scale: float | None = None,
        qk_norm: QKNorm | None = None,
        attn_softcap: float | None = None,
        sinks: Sinks | None = None,
        self_attention: AttentionChoice | None = None,
        layer: int = 0,
        mixer: SequenceMixer | None = None,
    ) -> None:
        """``make_residual`` builds the placement (``model.norm_placement``) of one sublayer;
        ``head_dim``, ``attn_scale``, ``qk_norm`` and ``attn_softcap`` go to every attention of the
        block (see ``MultiHeadAttention``), ``sinks`` to its self-attention only;
        ``self_attention`` (``model/attention``, None = standard) builds the self-attention of the
        stack's ``layer``-th block (0-based). ``mixer`` (``model/mixer``, src/models/mixers/): a
        recurrent token mixer in place of the self-attention, which ``attn`` then holds (None:
        softmax attention)."""
        super().__init__()
        attention = dict(head_dim=head_dim, scale=attn_scale, qk_norm=qk_norm, softcap=attn_softcap)
        self.attn_res = make_residual()
        self.attn_norm = make_norm() if self.attn_res.uses_norm else None
        choice = self_attention if self_attention is not None else StandardAttention()
        self.recurrent = mixer is not None  # the token-mixing sublayer keeps a state, not keys
        self.attn = (
            mixer
            if mixer is not None
            else choice.build(
                d_model, n_head, n_kv_head, bias, dropout, **attention, sinks=sinks, layer=layer
            )
        )
        if cross_attention:
            self.cross_res = make_residual()
            self.cross_norm = make_norm() if self.cross_res.uses_norm else None
            self.cross_attn = MultiHeadAttention(
                d_model, n_head, n_kv_head, bias, dropout, cross=True, **attention
            )
        ffn = make_ffn()
        if not isinstance(ffn, NoFFN):  # model/ffn=none: no FFN sublayer, norm or residual
            self.ffn_res = make_residual()
            self.ffn_norm = make_norm() if self.ffn_res.uses_norm else None
        self.ffn = ffn

    def sublayers(self) -> list[tuple[Residual, nn.Module]]:
        """(placement, sublayer) pairs in forward order."""
        pairs = [(self.attn_res, self.attn)]
        if hasattr(self, "cross_attn"):
            pairs.append((self.cross_res, self.cross_attn))
        if hasattr(self, "ffn_res"):
            pairs.append((self.ffn_res, self.ffn))
        return pairs

    def forward_flops(
        self,
        batch_size: int,
        seq_len: int,
        memory_len: int = 0,
        window: int | None = None,
        sink_keys: int = 0,
    ) -> int:
        """Matmul FLOPs of one forward over ``batch_size × seq_len`` tokens (cross-attention reads
        ``memory_len`` encoder positions; a sliding ``window`` counts only the keys each query
        sees; ``sink_keys`` sink tokens every query sees besides); see
        ``TransformerModel.forward_flops``."""
        if self.recurrent:
            flops = self.attn.forward_flops(batch_size, seq_len)
        else:
            flops = self.attn.forward_flops(batch_size, seq_len, seq_len, window)
            a = self.attn
            flops += attention_score_flops(batch_size, a.n_head, seq_len, sink_keys, a.head_dim)
        if hasattr(self, "cross_attn"):
            flops += self.cross_attn.forward_flops(batch_size, seq_len, memory_len)
        return flops + linear_flops(self.ffn, batch_size * seq_len)

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
        sinks: SinkKeys | None = None,
    ) -> tuple[Tensor, list[Tensor]]:
        """x: [B, T, C] -> ([B, T, C], attention probabilities when asked for); ``sinks``: the sink
        tokens' keys for the self-attention."""
        probs: list[Tensor] = []

        def self_attn(h: Tensor) -> Tensor:
            if self.recurrent:  # the state of the tokens before (generation), or a fresh one
                state = cache.states[layer_idx] if cache is not None else None
                out, state = self.attn(h, state)
                if cache is not None:
                    cache.states[layer_idx] = state
                return out
            o = self.attn(
                h,
                self_bias,
                position=position,
                positions=positions,
                cache=cache,
                layer_idx=layer_idx,
                need_weights=need_weights,
                sinks=sinks,
            )
            if o.probs is not None:
                probs.append(o.probs)
            return o.out

        x = self.attn_res(x, self.attn_norm, self_attn)
        if hasattr(self, "cross_attn"):

            def cross_attn(h: Tensor) -> Tensor:
                o = self.cross_attn(
                    h,
                    memory_bias,
                    memory=memory,
                    cache=cache,
                    layer_idx=layer_idx,
                    need_weights=need_weights,
                )
                if o.probs is not None:
                    probs.append(o.probs)
                return o.out

            x = self.cross_res(x, self.cross_norm, cross_attn)
        if hasattr(self, "ffn_res"):
            x = self.ffn_res(x, self.ffn_norm, self.ffn)
        return x, probs


@dataclass
class StackOutput:
    hidden: Tensor  # [B, T, C] after the final norm (if any)
    # per layer [B, H, T, S] (self, then cross)
    attentions: list[Tensor] = field(default_factory=list)


def build_bias(
    mask: AttentionMask | None,
    positions: Tensor,
    key_positions: Tensor,
    key_padding: Tensor | None,
    prefix_length: Tensor | None,
    score_bias: Tensor | None,
    dtype: torch.dtype,
    documents: Tensor | None = None,
) -> AttentionBias:
    """Combine structural mask, padding and position score bias into one AttentionBias.

    positions: [T] query indices; key_positions: [S]; key_padding: [B, S] (1 = real token);
    documents: boolean [B, 1, T, S], each query's own document (``data.document_mask``).
    """
    T, S = positions.shape[0], key_positions.shape[0]
    if (
        mask is not None
        and mask.causal
        and mask.window is None
        and key_padding is None
        and score_bias is None
        and prefix_length is None
        and documents is None
    ):
        if T == S:
            return AttentionBias(is_causal=True)  # kernel's own causal mask (flash-eligible)
        if T == 1:
            return AttentionBias()  # one new token sees the whole cache
    # [1|B, T, S]
    allowed = mask.allowed(positions, key_positions, prefix_length) if mask is not None else None
    if allowed is not None:
        allowed = allowed[:, None]  # [1|B, T, S] -> [1|B, 1, T, S]
    if key_padding is not None:
        pad = key_padding.bool()[:, None, None, :]  # [B, S] -> [B, 1, 1, S]
        allowed = pad if allowed is None else allowed & pad
    if documents is not None:
        allowed = documents if allowed is None else allowed & documents  # [B, 1, T, S]
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
        layer_masks: list[AttentionMask] | None = None,
        sink_tokens: nn.Embedding | None = None,
        kernel: str = "sdpa",
    ) -> None:
        """``layer_masks``: one mask per block (``model.layer_masks``); None = ``mask`` in every
        block. ``sink_tokens``: [n, C] learned sink embeddings (``model/sinks=token``).
        ``kernel``: ``model.attn_kernel``; "flex" builds each self-attention pattern as a
        FlexAttention BlockMask (components/flex.py) for full-sequence forwards."""
        super().__init__()
        self.kernel = kernel
        self.sink_tokens = sink_tokens
        self.position = position
        self.mask = mask
        self.layer_masks: list[AttentionMask | None] = (
            list(layer_masks) if layer_masks is not None else [mask] * len(blocks)
        )
        self.embed_norm = embed_norm
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(blocks)
        self.final_norm = final_norm

    @property
    def needs_prefix_length(self) -> bool:
        """Whether the forward needs ``prefix_length`` (the mask is a prefix LM's)."""
        return any(m is not None and m.needs_prefix_length for m in self.layer_masks)

    def cache_windows(self) -> list[int | None]:
        """Per block, the keys its KV cache must keep (a sliding window's ``window``; None: all)."""
        return [m.window if m is not None else None for m in self.layer_masks]

    def forward_flops(self, batch_size: int, seq_len: int, memory_len: int = 0) -> int:
        """Matmul FLOPs of the blocks over ``batch_size × seq_len`` tokens (see
        ``Block.forward_flops``)."""
        n = self.sink_count
        blocks: list[Block] = list(self.blocks)  # type: ignore[arg-type]
        sinks = sum(block.forward_flops(1, n) for block in blocks) if n else 0  # the sinks' pass
        return sinks + sum(
            block.forward_flops(batch_size, seq_len, memory_len, window, n)
            for block, window in zip(blocks, self.cache_windows(), strict=True)
        )

    @property
    def sink_count(self) -> int:
        """Sink tokens every query sees (0 without ``model/sinks=token``)."""
        return 0 if self.sink_tokens is None else self.sink_tokens.num_embeddings

    def sink_keys(self, dtype: torch.dtype) -> SinkKeys:
        """The sink tokens through the blocks: each layer's keys and values [1, K, n, D]. The sinks
        take no position (no embedding added, no rotation, no score bias) and see only each
        other, so they are the same for every input and a KV cache keeps them once."""
        assert self.sink_tokens is not None
        sinks = SinkKeys(self.sink_count)
        # [n, C] -> [1, n, C]; a lookup, not a view of the weight: under no_grad a view would
        # claim requires_grad without a grad_fn (FlopCounterMode's module hooks refuse it)
        ids = torch.arange(self.sink_count, device=self.sink_tokens.weight.device)
        h = self.sink_tokens(ids).to(dtype)[None]
        if self.embed_norm is not None:
            h = self.embed_norm(h)
        h = self.dropout(h)
        for i, block in enumerate(self.blocks):  # .forward: a block's hooks see the sequence only
            h, _ = block.forward(
                h, AttentionBias(), position=None, positions=None, layer_idx=i, sinks=sinks
            )
        sinks.capturing = False
        return sinks

    def _self_biases(
        self,
        positions: Tensor,
        offset: int,
        key_padding: Tensor | None,
        prefix_length: Tensor | None,
        rolling: bool,
        dtype: torch.dtype,
        documents: Tensor | None = None,
        document_ids: Tensor | None = None,
        need_weights: bool = False,
    ) -> dict[int, AttentionBias]:
        """One bias per distinct mask object (by ``id``). A sliding window's rolling cache
        (``rolling``) holds only its last ``window`` keys, so its keys start there. With
        ``kernel="flex"`` a full-sequence forward (no cache, no probabilities asked) gets a
        BlockMask instead of the dense mask; decoding with the cache keeps SDPA's."""
        flex = self.kernel == "flex" and not rolling and not need_weights
        biases: dict[int, AttentionBias] = {}
        for mask in self.layer_masks:
            if id(mask) in biases:
                continue
            w = mask.window if mask is not None else None
            start = max(0, offset - w) if rolling and w is not None else 0
            keys = torch.arange(start, offset + len(positions), device=positions.device)  # [S]
            if flex:
                biases[id(mask)] = AttentionBias(
                    flex=flex_bias(
                        mask,
                        q_start=offset,
                        k_start=start,
                        q_len=len(positions),
                        k_len=len(keys),
                        key_padding=None if key_padding is None else key_padding[:, start:],
                        prefix_length=prefix_length,
                        score_bias=self.position.score_bias(positions, keys),
                        document_ids=document_ids,
                        sinks=self.sink_count,
                        device=positions.device,
                    )
                )
                continue
            biases[id(mask)] = build_bias(
                mask,
                positions,
                keys,
                None if key_padding is None else key_padding[:, start:],  # [B, S]
                prefix_length,
                self.position.score_bias(positions, keys),
                dtype,
                documents,
            )
        return biases

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
        document_ids: Tensor | None = None,
    ) -> StackOutput:
        """x: token embeddings [B, T, C]; key_padding: [B, offset+T]; memory: [B, S, C];
        document_ids: [B, T] each token's document in a packed window (``data.document_mask``):
        queries see their own document only and absolute positions restart at its start.
        Relative schemes (RoPE, ALiBi, T5 bias) keep the window's positions: their scores
        depend on i - j alone, the same within a document as for the document alone."""
        B, T, _ = x.shape
        offset = cache.offset if cache is not None else 0
        positions = torch.arange(offset, offset + T, device=x.device)  # [T]
        self.position.check_length(offset + T)
        if cache is not None:
            self.position.check_cache(offset + T)
        documents = None
        if document_ids is not None:
            if any(block.recurrent for block in self.blocks):
                raise ValueError(
                    "document_ids need attention in every layer: a recurrent mixer's state would "
                    "carry one document into the next; set data.document_mask=false"
                )
            if cache is not None:
                raise ValueError(
                    "document_ids cannot be used with a KV cache: a generated sequence is one "
                    "document; generate without document_ids"
                )
            if self.kernel != "flex" or need_weights:  # flex reads the ids in its mask_mod
                documents = same_document(document_ids)  # [B, 1, T, T]
            x = self.position.add_to_embeddings(x, document_positions(document_ids))  # [B, T]
        else:
            x = self.position.add_to_embeddings(x, positions)
        if self.embed_norm is not None:
            x = self.embed_norm(x)
        x = self.dropout(x)
        self_biases = self._self_biases(
            positions,
            offset,
            key_padding,
            prefix_length,
            cache is not None,
            x.dtype,
            documents,
            document_ids,
            need_weights,
        )
        memory_bias = None
        if memory is not None or (cache is not None and cache.cross[0] is not None):
            memory_bias = build_bias(
                None, positions, positions, memory_padding, None, None, x.dtype
            )
        sinks = None
        if self.sink_tokens is not None:  # computed once per forward, or once per cache
            sinks = cache.sinks if cache is not None and cache.sinks is not None else None
            sinks = self.sink_keys(x.dtype) if sinks is None else sinks
            if cache is not None:
                cache.sinks = sinks
        attentions: list[Tensor] = []
        for i, block in enumerate(self.blocks):
            x, probs = block(
                x,
                self_biases[id(self.layer_masks[i])],
                position=self.position,
                positions=positions,
                memory=memory,
                memory_bias=memory_bias,
                cache=cache,
                layer_idx=i,
                need_weights=need_weights,
                sinks=sinks,
            )
            attentions.extend(probs)
        if self.final_norm is not None:
            x = self.final_norm(x)
        if cache is not None:
            cache.advance(T)
        return StackOutput(hidden=x, attentions=attentions)
