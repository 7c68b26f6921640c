"""Encoder-only masked language model (BERT): a bidirectional stack and an MLM head.

::

    ids ─ tok_embed ─ (+positions) ─ [embedding norm] ─ blocks × N ─ [final norm]
        ─ transform (dense, GELU, norm) ─ decoder (tied to tok_embed, + bias) ─ logits
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn
from torch.nn import functional as F

from src.errors import ConfigError
from src.models.components.flops import linear_flops
from src.models.components.kv_cache import KVCache
from src.models.config import ModelConfig
from src.models.families.base import FAMILIES, StackLayout, TransformerModel
from src.models.mixers.layers import uses_mixers
from src.models.outputs import Decoding, ModelOutput


class MLMTransform(nn.Module):
    """BERT's prediction-head transform (Devlin et al. 2019): dense C->C, GELU (erf), norm."""

    def __init__(self, d_model: int, norm: nn.Module) -> None:
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)
        self.norm = norm

    def forward(self, x: Tensor) -> Tensor:  # [B, T, C] -> [B, T, C]
        return self.norm(F.gelu(self.dense(x)))


@FAMILIES.register("encoder_only")
class EncoderOnly(TransformerModel):
    """Labels are aligned with the positions (no shift): -100 where a token was not masked."""

    default_mask = "bidirectional"
    left_to_right = False  # no p(x_t | x_<t): scored by pseudo-log-likelihood, cannot generate

    @classmethod
    def check_config(cls, config: ModelConfig) -> None:
        if uses_mixers(config):
            raise ConfigError(
                f"model/mixer={config.mixer.get('name')} (model.layer_mixers="
                f"{config.layer_mixers}) is causal; an encoder_only model is bidirectional, which "
                "the recurrent mixers do not serve. Use model/mixer=attention, or family "
                "decoder_only / encoder_decoder (mixers in its decoder)"
            )

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        self.encoder = self.make_stack(config.n_layer, self.make_mask(), "encoder")
        self.transform = MLMTransform(config.d_model, self.make_norm())
        self.head = self.make_head(bias=True)
        self.init_weights()

    @classmethod
    def layout(cls, config: ModelConfig) -> list[StackLayout]:
        mask = (config.mask or {}).get("name", cls.default_mask)
        return [
            StackLayout(
                "encoder",
                "token ids [B, T]",
                config.n_layer,
                mask,
                then="MLM transform<br/>dense, GELU, {norm}",
            )
        ]

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        labels: Tensor | None = None,
        *,
        prefix_length: Tensor | None = None,
        cache: KVCache | None = None,
        output_attentions: bool = False,
    ) -> ModelOutput:
        """input_ids: [B, T]; attention_mask: [B, T]; labels: [B, T] with -100 where not masked (no
        shift)."""
        if cache is not None:
            raise ValueError(
                "an encoder_only model has no incremental decoding; call it without cache"
            )
        out = self.encoder(
            self.embed(input_ids),
            key_padding=attention_mask,
            prefix_length=prefix_length,
            need_weights=output_attentions,
        )
        logits = self.logits(out.hidden)  # [B, T, V]
        loss = self.loss(logits, labels) if labels is not None else None
        return ModelOutput(
            logits=logits, loss=loss, hidden_states=out.hidden, attentions=out.attentions
        )

    def hidden_states(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        *,
        prefix_length: Tensor | None = None,
    ) -> Tensor:
        return self.encoder(
            self.embed(input_ids), key_padding=attention_mask, prefix_length=prefix_length
        ).hidden

    def logits(self, hidden: Tensor) -> Tensor:
        """The MLM head: transform, then the tied decoder: [..., C] -> [..., V]."""
        return super().logits(self.transform(hidden))

    def forward_flops(self, batch_size: int, seq_len: int) -> int:
        n = batch_size * seq_len
        return (
            self.encoder.forward_flops(batch_size, seq_len)
            + linear_flops(self.transform, n)
            + self.head_flops(n)
        )

    def start_decoding(self, input_ids: Tensor, max_new_tokens: int, **kwargs: Any) -> Decoding:
        raise ValueError(
            "an encoder_only (masked LM) model cannot generate text; use a decoder_only or "
            "encoder_decoder model"
        )
