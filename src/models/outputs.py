"""Named model outputs (transformers-style attribute names), never positional tuples."""
from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from src.models.components.kv_cache import KVCache


@dataclass
class ModelOutput:
    logits: Tensor  # [B, T, V]
    loss: Tensor | None = None  # mean cross-entropy over labelled tokens, when labels are given
    hidden_states: Tensor | None = None  # [B, T, C] last hidden state (after the final norm)
    attentions: list[Tensor] = field(default_factory=list)  # [B, H, T, S] per attention layer, when asked
    cache: KVCache | None = None  # the KV cache, when decoding incrementally
    encoder_hidden_states: Tensor | None = None  # [B, S, C] (encoder_decoder)
