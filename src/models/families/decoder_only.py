"""Decoder-only language model (GPT-2, Llama): one causal stack and an LM head.

::

    ids ─ tok_embed ─ (+positions) ─ blocks × N ─ final norm ─ head (tied to tok_embed) ─ logits
"""
from __future__ import annotations

from torch import Tensor
from torch.nn import functional as F

from src.models.components.kv_cache import KVCache
from src.models.config import ModelConfig
from src.models.families.base import FAMILIES, IGNORE_INDEX, TransformerModel
from src.models.outputs import ModelOutput


@FAMILIES.register("decoder_only")
class DecoderOnly(TransformerModel):
    default_mask = "causal"

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        self.decoder = self.make_stack(config.n_layer, self.make_mask())
        self.head = self.make_head()
        self.init_weights()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        labels: Tensor | None = None,
        *,
        prefix_length: Tensor | None = None,
        cache: KVCache | None = None,
        output_attentions: bool = False,
        logits_to_keep: int = 0,
    ) -> ModelOutput:
        """input_ids: [B, T]; attention_mask: [B, offset+T] (1 = token, 0 = padding);
        labels: [B, T] (shifted inside: position t predicts labels[t+1], as transformers);
        logits_to_keep: 0 = logits at every position, n > 0 = at the last n only (decoding
        needs one: the head is the costliest matmul of a small model; transformers' name)."""
        if logits_to_keep and labels is not None:
            raise ValueError("logits_to_keep needs labels=None: the loss scores every position")
        out = self.decoder(
            self.embed(input_ids),
            key_padding=attention_mask,
            prefix_length=prefix_length,
            cache=cache,
            need_weights=output_attentions,
        )
        logits = self.logits(out.hidden[:, -logits_to_keep:] if logits_to_keep else out.hidden)  # [B, T|n, V]
        loss = None
        if labels is not None:
            # Shift the labels, not the logits: logits[:, :-1] would copy [B, T-1, V] forward
            # and scatter it back in backward; the last position is simply not scored.
            loss = self.cross_entropy(logits, F.pad(labels[:, 1:], (0, 1), value=IGNORE_INDEX))
        return ModelOutput(logits=logits, loss=loss, hidden_states=out.hidden, attentions=out.attentions, cache=cache)
