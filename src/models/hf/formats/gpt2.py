"""GPT-2 (Radford et al. 2019) <-> our decoder_only: pre-norm, learned positions, tanh-GELU, tied
head.

The conversion is nanoGPT's ``from_pretrained``, step by step: ``Conv1D`` weights are
transposed, ``c_attn`` is already fused [q | k | v], the causal-mask buffers are dropped.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from src.models.components.norms import NORMS
from src.models.config import ModelConfig
from src.models.hf.adapter import ADAPTERS, Adapter, special_tokens, special_tokens_to_hf
from src.models.hf.architecture import ACTIVATIONS, ANY, Architecture, ffn_to_hf, setting
from src.models.hf.rules import Rule, Same, Transposed, linear


@ADAPTERS.register("gpt2")
class GPT2Adapter(Adapter):
    """GPT2LMHeadModel; base-model checkpoints (``h.0…``, the original ``gpt2`` repo) get the
    prefix."""

    arch = Architecture(
        "decoder_only",
        "pre",
        position={"name": "learned"},
        norm={"name": "layernorm", "eps": ANY},
        mask={"name": "causal"},
    )
    prefix, outside_prefix = "transformer.", ("lm_head.",)
    dropped = (
        (
            r"\.attn\.(bias|masked_bias)$",
            "causal-mask buffers of older checkpoints; our masks are built on the fly",
        ),
    )

    def config(self, hf: Any) -> ModelConfig:
        self.need(
            hf.scale_attn_weights,
            "scale_attn_weights=False (unscaled scores) is not supported; we always divide by √D",
        )
        self.need(
            not hf.scale_attn_by_inverse_layer_idx,
            "scale_attn_by_inverse_layer_idx=True (scores / (layer+1), Mistral/Stanford-CRFM) is "
            "not supported",
        )
        self.need(
            not hf.reorder_and_upcast_attn,
            "reorder_and_upcast_attn=True is not supported (it changes mixed-precision numerics, "
            "not the maths; set it to false in config.json if that is acceptable)",
        )
        self.need(
            not hf.add_cross_attention,
            "add_cross_attention=True (GPT-2 as a seq2seq decoder) is not supported",
        )
        self.need(
            hf.activation_function in ACTIVATIONS,
            f"activation_function={hf.activation_function!r} is not mapped; known: "
            f"{sorted(ACTIVATIONS)}",
        )
        return ModelConfig(
            family="decoder_only",
            vocab_size=hf.vocab_size,
            d_model=hf.n_embd,
            n_layer=hf.n_layer,
            n_head=hf.n_head,
            d_ff=hf.n_inner or 4 * hf.n_embd,
            max_seq_len=hf.n_positions,
            dropout=float(hf.resid_pdrop),
            bias=True,
            tie_embeddings=getattr(hf, "tie_word_embeddings", True),
            norm_placement="pre",
            position={"name": "learned"},
            norm={"name": "layernorm", "eps": hf.layer_norm_epsilon},
            ffn=dict(ACTIVATIONS[hf.activation_function]),
            mask={"name": "causal"},
            init_std=hf.initializer_range,
            **special_tokens(hf),
        )

    def rules(self, c: ModelConfig) -> list[Rule]:
        r: list[Rule] = [
            Same("tok_embed.weight", "transformer.wte.weight"),
            Same("decoder.position.table.weight", "transformer.wpe.weight"),
        ]
        for i in range(c.n_layer):
            h, o = f"transformer.h.{i}.", f"decoder.blocks.{i}."
            r += linear(o + "attn_norm", h + "ln_1", True)
            # c_attn is already fused [C, 3C] with output columns [q | k | v]: one transpose gives
            # our qkv rows
            r += linear(o + "attn.qkv", h + "attn.c_attn", True, Transposed)
            r += linear(o + "attn.out", h + "attn.c_proj", True, Transposed)
            r += linear(o + "ffn_norm", h + "ln_2", True)
            r += linear(o + "ffn.up", h + "mlp.c_fc", True, Transposed)
            r += linear(o + "ffn.down", h + "mlp.c_proj", True, Transposed)
        r += linear("decoder.final_norm", "transformer.ln_f", True)
        return r if c.tie_embeddings else r + [Same("head.weight", "lm_head.weight")]

    def hf_config(self, c: ModelConfig) -> Any:
        from transformers import GPT2Config

        return GPT2Config(
            vocab_size=c.vocab_size,
            n_positions=c.max_seq_len,
            n_embd=c.d_model,
            n_layer=c.n_layer,
            n_head=c.n_head,
            n_inner=c.d_ff,
            activation_function=ffn_to_hf(c),
            resid_pdrop=c.dropout,
            embd_pdrop=c.dropout,
            attn_pdrop=c.dropout,
            layer_norm_epsilon=setting(NORMS, c.norm, "eps"),
            initializer_range=c.init_std,
            tie_word_embeddings=c.tie_embeddings,
            **special_tokens_to_hf(c),
        )

    def hf_model_class(self) -> type[nn.Module]:
        from transformers import GPT2LMHeadModel

        return GPT2LMHeadModel
