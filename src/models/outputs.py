"""Named model outputs (transformers-style attribute names), never positional tuples."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from src.models.components.kv_cache import KVCache


@dataclass
class ModelOutput:
    logits: Tensor  # [B, T, V]
    loss: Tensor | None = None  # mean cross-entropy over labelled tokens, when labels are given
    hidden_states: Tensor | None = None  # [B, T, C] last hidden state (after the final norm)
    # [B, H, T, S] per attention layer, when asked
    attentions: list[Tensor] = field(default_factory=list)
    cache: KVCache | None = None  # the KV cache, when decoding incrementally
    encoder_hidden_states: Tensor | None = None  # [B, S, C] (encoder_decoder)


@dataclass
class AttentionProbs:
    """The attention probabilities of one layer, named (``TransformerModel.attention_probs``)."""

    kind: str  # "self" (a single stack), "encoder", "decoder" (self-attention) or "cross"
    layer: int
    probs: Tensor  # [B, H, T, S]; each row sums to one
    queries: Tensor  # [B, T] the token ids along the rows
    keys: Tensor  # [B, S] the token ids along the columns


@dataclass
class Decoding:
    """A generation in progress: a family's ``start_decoding`` builds it, ``decode_step`` reads it,
    ``src.models.generation.generate`` appends each chosen token."""

    # [B, P + n] what generate returns (the prompt, or the start token, then n new tokens)
    sequences: Tensor
    # [B, k] tokens the cache has not seen yet (the whole prefix at first, then the last token)
    fresh: Tensor
    cache: KVCache | None
    attention_mask: Tensor | None = (
        None  # [B, P] padding of the prompt (decoder-only) or of the source
    )
    prefix_length: Tensor | None = None  # [B] bidirectional prefix of a prefix-LM decoder
    memory: Tensor | None = None  # [B, S, C] encoder output (encoder_decoder)
    window: int | None = (
        None  # rows of a learned position table; past them the model slides without the cache
    )
    cache_limit: int | None = (
        None  # the longest sequence the KV cache holds exactly (dynamic RoPE); past it, no cache
    )

    def append(self, tokens: Tensor) -> None:
        """tokens: [B] chosen at this step."""
        # [B, P + n] -> [B, P + n + 1]
        self.sequences = torch.cat([self.sequences, tokens[:, None]], dim=1)
        self.fresh = tokens[:, None]
