"""MarianMT (Junczys-Dowmunt et al. 2018) <-> our encoder_decoder: the 2017 post-norm
Transformer with one shared vocabulary, embeddings scaled by √C (``scale_embedding`` -> our
``scale_embeddings``, Vaswani et al. §3.4) and fixed sinusoids in the [sin | cos] (concat)
layout, which we compute rather than load (a stored table is checked against ours).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from src.models.components.positions import sinusoid_table
from src.models.config import ModelConfig
from src.models.hf.adapter import ADAPTERS, Adapter, special_tokens, special_tokens_to_hf
from src.models.hf.architecture import ACTIVATIONS, ANY, Architecture, ffn_to_hf
from src.models.hf.rules import Constant, Rule, Same, fused_linear, linear, qkv_sizes


@ADAPTERS.register("marian")
class MarianAdapter(Adapter):
    """MarianMTModel; the encoder and decoder ``embed_tokens`` (and a tied ``lm_head``) are copies
    of ``shared``."""

    # fixed [sin | cos] sinusoids at base 10000; nn.LayerNorm's eps 1e-5; scale_embedding either way
    arch = Architecture(
        "encoder_decoder",
        "post",
        position={"name": "sinusoidal", "layout": "concat"},
        norm={"name": "layernorm", "eps": 1e-5},
        scale_embeddings=ANY,
    )
    prefix, outside_prefix = "model.", ("lm_head.", "final_logits_bias")

    def config(self, hf: Any) -> ModelConfig:
        self.need(
            getattr(hf, "share_encoder_decoder_embeddings", True)
            and hf.decoder_vocab_size in (None, hf.vocab_size),
            "unshared encoder/decoder embeddings (share_encoder_decoder_embeddings=False or "
            "decoder_vocab_size != vocab_size) are not supported: our encoder_decoder has one "
            "token embedding",
        )
        self.need(
            hf.encoder_attention_heads == hf.decoder_attention_heads
            and hf.encoder_ffn_dim == hf.decoder_ffn_dim,
            "encoder and decoder must have the same attention heads and ffn dim (our model.n_head "
            "/ model.d_ff)",
        )
        self.need(
            hf.activation_function in ACTIVATIONS,
            f"activation_function={hf.activation_function!r} is not mapped; known: "
            f"{sorted(ACTIVATIONS)}",
        )
        self.need(
            hf.d_model % 2 == 0,
            f"d_model={hf.d_model} is odd; Marian's odd-width sinusoid layout is not supported",
        )
        for flag in (
            "normalize_before",
            "normalize_embedding",
            "add_final_layer_norm",
            "layernorm_embedding",
        ):
            self.need(
                not getattr(hf, flag, False),
                f"{flag}=True (a pre-norm / BART-style variant) is not supported",
            )
        return ModelConfig(
            family="encoder_decoder",
            vocab_size=hf.vocab_size,
            d_model=hf.d_model,
            n_layer=hf.encoder_layers,
            n_encoder_layer=hf.encoder_layers,
            n_decoder_layer=hf.decoder_layers,
            n_head=hf.encoder_attention_heads,
            d_ff=hf.encoder_ffn_dim,
            max_seq_len=hf.max_position_embeddings,
            dropout=float(hf.dropout),
            bias=True,
            tie_embeddings=getattr(hf, "tie_word_embeddings", True),
            norm_placement="post",
            scale_embeddings=bool(hf.scale_embedding),
            position={"name": "sinusoidal", "layout": "concat"},
            norm={"name": "layernorm", "eps": 1e-5},  # Marian's nn.LayerNorm default
            ffn=dict(ACTIVATIONS[hf.activation_function]),
            mask=None,
            init_std=hf.init_std,
            **special_tokens(hf),
            decoder_start_token_id=hf.decoder_start_token_id,  # Marian starts decoding from <pad>
        )

    def rules(self, c: ModelConfig) -> list[Rule]:
        # [P, C], what embed_positions holds
        table = sinusoid_table(c.max_seq_len, c.d_model, "concat")
        r: list[Rule] = [Same("tok_embed.weight", "model.shared.weight")]
        for stack, n in (("encoder", c.encoder_layers), ("decoder", c.decoder_layers)):
            r.append(
                Constant(
                    f"model.{stack}.embed_positions.weight",
                    table,
                    "Marian positions are fixed sinusoids",
                )
            )
            for i in range(n):
                h, o = f"model.{stack}.layers.{i}.", f"{stack}.blocks.{i}."
                a = h + "self_attn."
                r += fused_linear(
                    o + "attn.qkv", (a + "q_proj", a + "k_proj", a + "v_proj"), qkv_sizes(c), True
                )
                r += linear(o + "attn.out", a + "out_proj", True)
                r += linear(o + "attn_norm", h + "self_attn_layer_norm", True)
                # cross-attention: Q from the decoder, [k | v] fused over the encoder output
                if stack == "decoder":
                    x = h + "encoder_attn."
                    r += linear(o + "cross_attn.q", x + "q_proj", True)
                    r += fused_linear(
                        o + "cross_attn.kv", (x + "k_proj", x + "v_proj"), qkv_sizes(c)[1:], True
                    )
                    r += linear(o + "cross_attn.out", x + "out_proj", True)
                    r += linear(o + "cross_norm", h + "encoder_attn_layer_norm", True)
                r += linear(o + "ffn.up", h + "fc1", True)
                r += linear(o + "ffn.down", h + "fc2", True)
                r += linear(o + "ffn_norm", h + "final_layer_norm", True)
        r.append(
            Constant(
                "final_logits_bias",
                torch.zeros(1, c.vocab_size),
                "a non-zero final_logits_bias has no place in our head (bias-free for "
                "encoder_decoder)",
            )
        )
        return r if c.tie_embeddings else r + [Same("head.weight", "lm_head.weight")]

    def copies(self, c: ModelConfig) -> dict[str, str]:
        shared = {
            f"model.{s}.embed_tokens.weight": "tok_embed.weight" for s in ("encoder", "decoder")
        }
        return shared | super().copies(c)

    def hf_config(self, c: ModelConfig) -> Any:
        from transformers import MarianConfig

        start = c.decoder_start_token_id if c.decoder_start_token_id is not None else c.pad_token_id
        return MarianConfig(
            vocab_size=c.vocab_size,
            decoder_vocab_size=c.vocab_size,
            max_position_embeddings=c.max_seq_len,
            encoder_layers=c.encoder_layers,
            decoder_layers=c.decoder_layers,
            encoder_ffn_dim=c.d_ff,
            decoder_ffn_dim=c.d_ff,
            encoder_attention_heads=c.n_head,
            decoder_attention_heads=c.n_head,
            activation_function=ffn_to_hf(c),
            d_model=c.d_model,
            dropout=c.dropout,
            attention_dropout=c.dropout,
            init_std=c.init_std,
            scale_embedding=c.scale_embeddings,
            decoder_start_token_id=start,
            forced_eos_token_id=None,
            share_encoder_decoder_embeddings=True,
            tie_word_embeddings=c.tie_embeddings,
            **special_tokens_to_hf(c),
        )

    def hf_model_class(self) -> type[nn.Module]:
        from transformers import MarianMTModel

        return MarianMTModel
