"""Llama (Touvron et al. 2023) <-> our decoder_only: RMSNorm, SwiGLU, RoPE, GQA, no biases, untied
head.

Hugging Face Llama checkpoints already store q/k rows permuted for the rotate_half pairing
([first half | second half] of each head), which is what our RoPE uses, so the projections
are copied without permutation. ``rope_parameters`` (transformers 5; ``rope_scaling`` in 4) of
type linear, dynamic, yarn or llama3 map to ``model.position.scaling`` (``ROPE_KEYS``), and a
``head_dim`` other than hidden_size / heads to ``model.d_head``.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from src.models.components.norms import NORMS
from src.models.components.positions import POSITIONS
from src.models.config import ModelConfig
from src.models.hf.adapter import ADAPTERS, Adapter, special_tokens, special_tokens_to_hf
from src.models.hf.architecture import ANY, Architecture, setting
from src.models.hf.rules import Rule, Same, fused_linear, linear, qkv_sizes

#: Our ``model.position.scaling`` keys -> transformers' ``rope_parameters`` keys, per rope type
#: (``factor`` first; ``original_max_seq_len`` only where transformers reads it).
ROPE_KEYS: dict[str, dict[str, str]] = {
    "linear": {"factor": "factor"},
    "dynamic": {"factor": "factor"},
    "yarn": {
        "factor": "factor",
        "original_max_seq_len": "original_max_position_embeddings",
        "beta_fast": "beta_fast",
        "beta_slow": "beta_slow",
        "attention_factor": "attention_factor",
        "mscale": "mscale",
        "mscale_all_dim": "mscale_all_dim",
        "truncate": "truncate",
    },
    "llama3": {
        "factor": "factor",
        "original_max_seq_len": "original_max_position_embeddings",
        "low_freq_factor": "low_freq_factor",
        "high_freq_factor": "high_freq_factor",
    },
}


@ADAPTERS.register("llama")
class LlamaAdapter(Adapter):
    """LlamaForCausalLM; transformers 4 (``rope_theta``) and 5 (``rope_parameters``) configs both
    read."""

    arch = Architecture(
        "decoder_only",
        "pre",
        position={"name": "rope", "theta": ANY, "scaling": ANY},
        norm={"name": "rmsnorm", "eps": ANY},
        ffn={"name": "swiglu"},
        mask={"name": "causal"},
        bias=ANY,
        gqa=True,
        more={"d_head": ANY},
    )
    prefix, outside_prefix = "model.", ("lm_head.",)
    dropped = (
        (
            r"rotary_emb\.inv_freq$",
            "RoPE frequencies of older checkpoints; recomputed from rope_theta",
        ),
    )

    def config(self, hf: Any) -> ModelConfig:
        rope = dict(getattr(hf, "rope_parameters", None) or {})
        if not rope:  # transformers 4.x: rope_theta and rope_scaling at top level
            scaling = getattr(hf, "rope_scaling", None) or {}
            rope = {
                **scaling,
                "rope_type": scaling.get("rope_type", scaling.get("type", "default")),
                "rope_theta": hf.rope_theta,
            }
        self.need(
            hf.hidden_act == "silu",
            f"hidden_act={hf.hidden_act!r} is not supported (our swiglu uses SiLU)",
        )
        head_dim = getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads
        bias = bool(getattr(hf, "attention_bias", False))  # Mistral's config has no such key
        self.need(
            bias == bool(getattr(hf, "mlp_bias", False)),
            f"attention_bias={bias} with mlp_bias={getattr(hf, 'mlp_bias', False)}: "
            "our model.bias sets both at once",
        )
        return ModelConfig(
            family="decoder_only",
            vocab_size=hf.vocab_size,
            d_model=hf.hidden_size,
            n_layer=hf.num_hidden_layers,
            n_head=hf.num_attention_heads,
            n_kv_head=hf.num_key_value_heads or hf.num_attention_heads,
            d_head=None if head_dim * hf.num_attention_heads == hf.hidden_size else head_dim,
            d_ff=hf.intermediate_size,
            max_seq_len=hf.max_position_embeddings,
            dropout=float(hf.attention_dropout),
            bias=bias,
            tie_embeddings=bool(getattr(hf, "tie_word_embeddings", False)),
            norm_placement="pre",
            position=self.position(rope, hf.max_position_embeddings),
            norm={"name": "rmsnorm", "eps": hf.rms_norm_eps},
            ffn={"name": "swiglu"},
            mask={"name": "causal"},
            init_std=hf.initializer_range,
            **special_tokens(hf),
        )

    def position(self, rope: dict[str, Any], max_positions: int) -> dict[str, Any]:
        """transformers' rope parameters -> our ``position`` node (``scaling`` for a scaled
        rope_type)."""
        kind = rope.get("rope_type", "default")
        node: dict[str, Any] = {"name": "rope", "theta": float(rope["rope_theta"])}
        if kind == "default":
            return node
        self.need(
            kind in ROPE_KEYS,
            f"rope scaling {rope} (rope_type={kind!r}) is not supported; supported rope types: "
            f"default, {', '.join(ROPE_KEYS)}",
        )
        scaling: dict[str, Any] = {"name": kind}
        for ours, theirs in ROPE_KEYS[kind].items():
            value = rope.get(theirs)
            # the default
            if value is not None and not (
                ours == "original_max_seq_len" and value == max_positions
            ):
                scaling[ours] = value
        return {**node, "scaling": scaling}

    def rules(self, c: ModelConfig) -> list[Rule]:
        r: list[Rule] = [Same("tok_embed.weight", "model.embed_tokens.weight")]
        for i in range(c.n_layer):
            h, o = f"model.layers.{i}.", f"decoder.blocks.{i}."
            a = h + "self_attn."
            r += linear(o + "attn_norm", h + "input_layernorm", False)
            # GQA: q_proj has H·D rows, k_proj and v_proj K·D each; stacked as [q | k | v]
            r += fused_linear(
                o + "attn.qkv", (a + "q_proj", a + "k_proj", a + "v_proj"), qkv_sizes(c), c.bias
            )
            r += linear(o + "attn.out", a + "o_proj", c.bias)
            r += linear(o + "ffn_norm", h + "post_attention_layernorm", False)
            r += linear(o + "ffn.gate", h + "mlp.gate_proj", c.bias)
            r += linear(o + "ffn.up", h + "mlp.up_proj", c.bias)
            r += linear(o + "ffn.down", h + "mlp.down_proj", c.bias)
        r += linear("decoder.final_norm", "model.norm", False)
        return r if c.tie_embeddings else r + [Same("head.weight", "lm_head.weight")]

    def hf_config(self, c: ModelConfig) -> Any:
        from transformers import LlamaConfig

        return LlamaConfig(**self.hf_kwargs(c), mlp_bias=c.bias)

    def hf_kwargs(self, c: ModelConfig) -> dict[str, Any]:
        """The transformers config keys Llama-like formats share."""
        return dict(
            vocab_size=c.vocab_size,
            hidden_size=c.d_model,
            intermediate_size=c.d_ff,
            num_hidden_layers=c.n_layer,
            num_attention_heads=c.n_head,
            num_key_value_heads=c.kv_heads,
            head_dim=c.head_dim,
            hidden_act="silu",
            max_position_embeddings=c.max_seq_len,
            rms_norm_eps=setting(NORMS, c.norm, "eps"),
            rope_parameters=self.rope_parameters(c),
            attention_bias=c.bias,
            attention_dropout=c.dropout,
            initializer_range=c.init_std,
            tie_word_embeddings=c.tie_embeddings,
            **special_tokens_to_hf(c),
        )

    def rope_parameters(self, c: ModelConfig) -> dict[str, Any]:
        """Our ``position`` node -> transformers 5 ``rope_parameters``."""
        params: dict[str, Any] = {
            "rope_type": "default",
            "rope_theta": float(setting(POSITIONS, c.position, "theta")),
        }
        scaling = c.position.get("scaling")
        if scaling:
            params["rope_type"] = scaling["name"]
            for ours, theirs in ROPE_KEYS[scaling["name"]].items():
                value = scaling.get(ours, c.max_seq_len if ours == "original_max_seq_len" else None)
                if value is not None:
                    params[theirs] = value
        return params

    def export_problems(self, c: ModelConfig) -> list[str]:
        p = super().export_problems(c)
        scaling = c.position.get("scaling") or {}
        if (
            scaling.get("name") == "dynamic"
            and scaling.get("original_max_seq_len", c.max_seq_len) != c.max_seq_len
        ):
            p.append(
                f"model.position.scaling.original_max_seq_len={scaling['original_max_seq_len']} "
                "(transformers' dynamic rope scales from max_position_embeddings = "
                f"model.max_seq_len={c.max_seq_len})"
            )
        return p

    def hf_model_class(self) -> type[nn.Module]:
        from transformers import LlamaForCausalLM

        return LlamaForCausalLM
