"""Encoder-decoder (Vaswani et al. 2017; Marian, T5): a bidirectional encoder, and a causal
decoder whose blocks add cross-attention with Q from the decoder and K/V from the encoder.

::

    src ─ tok_embed ─ encoder blocks × N ───────────────┐ memory [B, S, C]
    tgt ─ tok_embed ─ decoder blocks × M (self, cross ←─┘, FFN) ─ head ─ logits

Labels follow transformers: ``labels`` [B, T] are the target itself (aligned with the
logits, not shifted); the decoder is teacher-forced on ``shift_right(labels)`` =
``[start, y0, …, y_{T-2}]`` unless ``decoder_input_ids`` are given. A prompt is a *source*:
generation encodes it once and writes a new sequence from the start token.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from src.errors import ConfigError
from src.models.components.kv_cache import KVCache
from src.models.components.masks import MASKS
from src.models.config import ModelConfig
from src.models.families.base import FAMILIES, IGNORE_INDEX, StackLayout, TransformerModel
from src.models.outputs import AttentionProbs, Decoding, ModelOutput


@FAMILIES.register("encoder_decoder")
class EncoderDecoder(TransformerModel):
    prompt_is_source = True

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        self.encoder = self.make_stack(
            config.encoder_layers, MASKS.build({"name": "bidirectional"}), "encoder"
        )
        self.decoder = self.make_stack(
            config.decoder_layers, MASKS.build({"name": "causal"}), "decoder", cross_attention=True
        )
        self.head = self.make_head()
        self.init_weights()

    @classmethod
    def derive(cls, config: dict[str, Any]) -> dict[str, Any]:
        """``model.mask: causal`` (the decoder-only defaults' mask) is what this family's decoder
        does by construction, and its encoder is bidirectional: the family fixes both masks, so
        that setting becomes ``null``. Another mask asks for what the family cannot do."""
        if (config.get("mask") or {}).get("name") == "causal":
            return {**config, "mask": None}
        return config

    @classmethod
    def check_config(cls, config: ModelConfig) -> None:
        if config.mask is not None:
            raise ConfigError(
                f"model/mask={config.mask.get('name')} is for decoder_only / encoder_only; an "
                "encoder_decoder's encoder is bidirectional and its decoder causal. Remove "
                "model/mask (or set model.mask=null)"
            )
        if config.layer_masks is not None:
            raise ConfigError(
                f"model.layer_masks={config.layer_masks} is for decoder_only / encoder_only; an "
                "encoder_decoder fixes its masks (bidirectional encoder, causal decoder). Set "
                "model.layer_masks=null"
            )
        if config.sinks.get("name") != "none":
            raise ConfigError(
                f"model/sinks={config.sinks.get('name')} is for decoder_only / encoder_only; an "
                "encoder_decoder's cross-attention has no sink. Set model/sinks=none"
            )

    @classmethod
    def layout(cls, config: ModelConfig) -> list[StackLayout]:
        return [
            StackLayout("encoder", "source ids [B, S]", config.encoder_layers, "bidirectional"),
            StackLayout(
                "decoder", "target ids [B, T]", config.decoder_layers, "causal", cross=True
            ),
        ]

    @property
    def decoder_start_id(self) -> int:
        """``decoder_start_token_id``, else ``bos``, else ``pad`` (a python int: no device sync)."""
        c = self.config
        start = next(
            (
                t
                for t in (c.decoder_start_token_id, c.bos_token_id, c.pad_token_id)
                if t is not None
            ),
            None,
        )
        if start is None:
            raise ValueError(
                "model.decoder_start_token_id is not set; set it (or bos_token_id / pad_token_id) "
                "in the model config"
            )
        return int(start)

    def start_tokens(self, batch: int, device: torch.device) -> Tensor:
        # [B, 1]
        return torch.full((batch, 1), self.decoder_start_id, dtype=torch.long, device=device)

    def shift_right(self, labels: Tensor) -> Tensor:
        """Teacher forcing input: labels [y0, y1, …] (-100 for padding) -> [start, y0, y1, …]
        (padding -> pad id)."""
        pad = self.config.pad_token_id if self.config.pad_token_id is not None else 0
        shifted = torch.cat(
            [labels.new_full((labels.shape[0], 1), self.decoder_start_id), labels[:, :-1]], dim=1
        )
        return shifted.masked_fill(shifted == IGNORE_INDEX, pad)

    def encode(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        output_attentions: bool = False,
    ) -> Tensor:
        """[B, S] -> encoder output (memory) [B, S, C]."""
        return self.encoder(
            self.embed(input_ids), key_padding=attention_mask, need_weights=output_attentions
        ).hidden

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
                raise ValueError(
                    "encoder_decoder needs input_ids (source) or encoder_hidden_states"
                )
            encoder_hidden_states = self.encode(input_ids, attention_mask)
        if decoder_input_ids is None:
            if labels is None:
                raise ValueError("encoder_decoder needs decoder_input_ids or labels")
            decoder_input_ids = self.shift_right(labels)
        out = self.decoder(
            self.embed(decoder_input_ids),
            key_padding=decoder_attention_mask,
            memory=encoder_hidden_states,
            memory_padding=attention_mask,
            cache=cache,
            need_weights=output_attentions,
        )
        logits = self.logits(out.hidden)  # [B, T, V]
        loss = self.loss(logits, labels) if labels is not None else None
        return ModelOutput(
            logits=logits,
            loss=loss,
            hidden_states=out.hidden,
            attentions=out.attentions,
            cache=cache,
            encoder_hidden_states=encoder_hidden_states,
        )

    def hidden_states(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        *,
        decoder_input_ids: Tensor,
        decoder_attention_mask: Tensor | None = None,
    ) -> Tensor:
        """The decoder's states [B, T, C] for target prefix ``decoder_input_ids`` given source
        ``input_ids``."""
        memory = self.encode(input_ids, attention_mask)
        return self.decoder(
            self.embed(decoder_input_ids),
            key_padding=decoder_attention_mask,
            memory=memory,
            memory_padding=attention_mask,
        ).hidden

    def forward_flops(self, batch_size: int, seq_len: int, target_len: int | None = None) -> int:
        """Source of ``seq_len`` tokens, target of ``target_len`` (default: ``seq_len`` too)."""
        T = seq_len if target_len is None else target_len
        return (
            self.encoder.forward_flops(batch_size, seq_len)
            + self.decoder.forward_flops(batch_size, T, memory_len=seq_len)
            + self.head_flops(batch_size * T)
        )

    # -- generation: read the prompt as a source, write a new sequence --------------------------
    def start_decoding(
        self,
        input_ids: Tensor,
        max_new_tokens: int,
        *,
        attention_mask: Tensor | None = None,
        prefix_length: Tensor | None = None,
        use_cache: bool = True,
    ) -> Decoding:
        if prefix_length is not None:
            raise ValueError(
                "prefix_length is for prefix-LM decoders; an encoder_decoder reads its source "
                "bidirectionally"
            )
        memory = self.encode(input_ids, attention_mask)  # [B, S, C], once
        start = self.start_tokens(input_ids.shape[0], input_ids.device)  # [B, 1]
        cache = (
            KVCache(len(self.decoder.blocks), max_length=1 + max_new_tokens) if use_cache else None
        )
        return Decoding(
            start,
            start,
            cache,
            attention_mask=attention_mask,
            memory=memory,
            cache_limit=self.cache_limit,
        )

    def decode_step(self, d: Decoding) -> Tensor:
        if (
            d.cache is not None
            and d.cache_limit is not None
            and d.sequences.shape[1] > d.cache_limit
        ):
            # past a dynamic RoPE's original length every rotation changes: recompute the prefix
            d.cache = None
        ids = d.fresh if d.cache is not None else d.sequences
        out = self(
            encoder_hidden_states=d.memory,
            attention_mask=d.attention_mask,
            decoder_input_ids=ids,
            cache=d.cache,
        )
        return out.logits[:, -1]  # [B, V]

    def new_tokens(self, sequences: Tensor, input_ids: Tensor) -> Tensor:
        return sequences[:, 1:]  # after the start token

    def attention_probs(
        self,
        input_ids: Tensor,
        *,
        decoder_input_ids: Tensor | None = None,
        prefix_length: Tensor | None = None,
    ) -> list[AttentionProbs]:
        """Encoder self-attention, decoder self-attention (teacher-forced on ``decoder_input_ids``,
        default: the start token alone) and cross-attention (decoder queries, encoder keys)."""
        if prefix_length is not None:
            raise ValueError("prefix_length is for prefix-LM decoders; an encoder_decoder has none")
        # encoder self-attention, per layer
        enc = self.encoder(self.embed(input_ids), need_weights=True)
        if decoder_input_ids is None:
            decoder_input_ids = self.start_tokens(input_ids.shape[0], input_ids.device)
        out = self(
            encoder_hidden_states=enc.hidden,
            decoder_input_ids=decoder_input_ids,
            output_attentions=True,
        )
        # decoder blocks append self-attention, then cross-attention: [self0, cross0, self1, cross1,
        # …]; a block whose mixer is not attention (model/mixer) appends its cross map only
        src, tgt = input_ids, decoder_input_ids
        maps = iter(out.attentions)
        decoder: list[AttentionProbs] = []
        cross: list[AttentionProbs] = []
        for i, block in enumerate(self.decoder.blocks):
            if not block.recurrent:
                decoder.append(AttentionProbs("decoder", i, next(maps), tgt, tgt))
            cross.append(AttentionProbs("cross", i, next(maps), tgt, src))
        encoder = [AttentionProbs("encoder", i, p, src, src) for i, p in enumerate(enc.attentions)]
        return encoder + decoder + cross
