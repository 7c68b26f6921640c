"""Encoder-decoder (Vaswani et al. 2017; Marian, T5): a bidirectional encoder, and a causal
decoder whose blocks add cross-attention with Q from the decoder and K/V from the encoder.

::

    src ─ tok_embed ─ encoder blocks × N ───────────────┐ memory [B, S, C]
    tgt ─ tok_embed ─ decoder blocks × M (self, cross ←─┘, FFN) ─ head ─ logits
"""
from __future__ import annotations

import torch
from torch import Tensor

from src.models.components.kv_cache import KVCache
from src.models.components.masks import MASKS
from src.models.config import ModelConfig
from src.models.families.base import FAMILIES, IGNORE_INDEX, TransformerModel
from src.models.outputs import ModelOutput


def shift_right(labels: Tensor, pad_token_id: int, decoder_start_token_id: int) -> Tensor:
    """Teacher forcing input: [start, y0, y1, …] from labels [y0, y1, …] (-100 -> pad)."""
    shifted = labels.new_full(labels.shape, decoder_start_token_id)
    shifted[:, 1:] = labels[:, :-1]
    return shifted.masked_fill(shifted == IGNORE_INDEX, pad_token_id)


@FAMILIES.register("encoder_decoder")
class EncoderDecoder(TransformerModel):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        self.encoder = self.make_stack(config.encoder_layers, MASKS.build({"name": "bidirectional"}))
        self.decoder = self.make_stack(config.decoder_layers, MASKS.build({"name": "causal"}), cross_attention=True)
        self.head = self.make_head()
        self.init_weights()

    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None, output_attentions: bool = False) -> Tensor:
        """[B, S] -> encoder output (memory) [B, S, C]."""
        return self.encoder(self.embed(input_ids), key_padding=attention_mask, need_weights=output_attentions).hidden

    def start_tokens(self, batch: int, device: torch.device) -> Tensor:
        start = self.config.decoder_start_token_id
        if start is None:
            start = self.config.bos_token_id if self.config.bos_token_id is not None else self.config.pad_token_id
        if start is None:
            raise ValueError("model.decoder_start_token_id is not set; set it (or bos_token_id / pad_token_id) in the model config")
        return torch.full((batch, 1), start, dtype=torch.long, device=device)

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        decoder_input_ids: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
        labels: Tensor | None = None,
        *,
        encoder_hidden_states: Tensor | None = None,
        cache: KVCache | None = None,
        output_attentions: bool = False,
    ) -> ModelOutput:
        """input_ids: source [B, S]; decoder_input_ids: target prefix [B, T] (built from labels
        by shifting right when absent, as transformers); labels: [B, T] (not shifted)."""
        if encoder_hidden_states is None and not (cache is not None and cache.cross[0] is not None):
            if input_ids is None:
                raise ValueError("encoder_decoder needs input_ids (source) or encoder_hidden_states")
            encoder_hidden_states = self.encode(input_ids, attention_mask)
        if decoder_input_ids is None:
            if labels is None:
                raise ValueError("encoder_decoder needs decoder_input_ids or labels")
            pad = self.config.pad_token_id if self.config.pad_token_id is not None else 0
            start = self.start_tokens(1, labels.device).item()
            decoder_input_ids = shift_right(labels, pad, int(start))
        out = self.decoder(
            self.embed(decoder_input_ids),
            key_padding=decoder_attention_mask,
            memory=encoder_hidden_states,
            memory_padding=attention_mask,
            cache=cache,
            need_weights=output_attentions,
        )
        logits = self.logits(out.hidden)  # [B, T, V]
        loss = self.cross_entropy(logits, labels) if labels is not None else None
        return ModelOutput(
            logits=logits, loss=loss, hidden_states=out.hidden, attentions=out.attentions,
            cache=cache, encoder_hidden_states=encoder_hidden_states,
        )
