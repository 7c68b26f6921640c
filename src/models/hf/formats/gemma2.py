"""Gemma 2 (Gemma Team 2024, arXiv:2408.00118) <-> our decoder_only.

What differs from Llama (§2 of the report), and where it maps:

* local and global layers alternate (``layer_types``: sliding_attention, full_attention, ...):
  ``model.layer_masks`` cycled over the layers, with ``model/mask=sliding_window`` and
  ``model.mask.window = sliding_window`` (key j is visible to query i when i - W < j <= i);
* ``attn_logit_softcapping`` / ``final_logit_softcapping``: ``model.attn_softcap`` /
  ``model.final_softcap`` (cap · tanh(x / cap), on the scaled scores before the mask and on the
  logits);
* four RMSNorms per block, before and after each sublayer (``input_layernorm``,
  ``post_attention_layernorm``, ``pre_feedforward_layernorm``, ``post_feedforward_layernorm``):
  ``model.norm_placement=sandwich``, x + norm'(f(norm(x))); each norm scales by (1 + w):
  ``model/norm=gemma_rmsnorm``, which stores w as Gemma does;
* the scores are scaled by ``query_pre_attn_scalar``^-1/2: ``model.attn_scale`` (None when it is
  ``head_dim``, our default 1/√d_head);
* the embeddings are multiplied by √hidden_size: ``model.scale_embeddings``;
* GeGLU with the tanh GELU (``hidden_activation=gelu_pytorch_tanh``): ``model/ffn=geglu``;
* the head is tied to the embeddings in the released models (``tie_word_embeddings``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from torch import nn

from src.models.components.ffn import FFNS
from src.models.config import ModelConfig
from src.models.hf.adapter import ADAPTERS, special_tokens
from src.models.hf.architecture import ANY, _node_problems, setting
from src.models.hf.formats.llama import LlamaAdapter
from src.models.hf.formats.mistral import CAUSAL, WINDOWED
from src.models.hf.rules import Rule, Same, fused_linear, linear, qkv_sizes

#: transformers' layer type <-> our mask name
LAYER_TYPES = {"sliding_attention": "sliding_window", "full_attention": "causal"}
#: transformers' hidden_activation <-> our geglu's ``approximate``
GELUS = {"gelu_pytorch_tanh": "tanh", "gelu": "none"}


@ADAPTERS.register("gemma2")
class Gemma2Adapter(LlamaAdapter):
    """Gemma2ForCausalLM (the text model)."""

    arch = dataclasses.replace(
        LlamaAdapter.arch,
        norm_placement="sandwich",
        norm={"name": "gemma_rmsnorm", "eps": ANY},
        ffn={"name": "geglu", "approximate": ANY},
        mask=None,  # checked in export_problems: causal or sliding_window, per layer
        bias=False,
        scale_embeddings=True,
        more={
            "d_head": ANY,
            "attn_scale": ANY,
            "layer_masks": ANY,
            "attn_softcap": ANY,
            "final_softcap": ANY,
        },
    )

    def config(self, hf: Any) -> ModelConfig:
        self.need(
            hf.hidden_activation in GELUS,
            f"hidden_activation={hf.hidden_activation!r} is not supported; supported: "
            f"{', '.join(GELUS)} (our geglu)",
        )
        self.need(not hf.attention_bias, "attention_bias=True is not supported (no MLP biases)")
        self.need(
            not getattr(hf, "use_bidirectional_attention", False),
            "use_bidirectional_attention=True is not supported (a causal decoder)",
        )
        types = list(hf.layer_types)
        self.need(
            set(types) <= set(LAYER_TYPES),
            f"layer_types={types} has a type other than {', '.join(LAYER_TYPES)}",
        )
        # the shortest cycle of layer types that repeats over the layers
        period = next(
            p
            for p in range(1, len(types) + 1)
            if all(t == types[i % p] for i, t in enumerate(types))
        )
        names = [LAYER_TYPES[t] for t in types[:period]]
        windowed = "sliding_window" in names
        head_dim = hf.head_dim
        scalar = hf.query_pre_attn_scalar
        return ModelConfig(
            family="decoder_only",
            vocab_size=hf.vocab_size,
            d_model=hf.hidden_size,
            n_layer=hf.num_hidden_layers,
            n_head=hf.num_attention_heads,
            n_kv_head=hf.num_key_value_heads,
            d_head=None if head_dim * hf.num_attention_heads == hf.hidden_size else head_dim,
            attn_scale=None if scalar == head_dim else float(scalar) ** -0.5,
            d_ff=hf.intermediate_size,
            max_seq_len=hf.max_position_embeddings,
            dropout=float(hf.attention_dropout),
            bias=False,
            tie_embeddings=bool(hf.tie_word_embeddings),
            norm_placement="sandwich",
            scale_embeddings=True,
            position=self.position(dict(hf.rope_parameters), hf.max_position_embeddings),
            norm={"name": "gemma_rmsnorm", "eps": hf.rms_norm_eps},
            ffn={"name": "geglu", "approximate": GELUS[hf.hidden_activation]},
            mask=dict(WINDOWED, window=int(hf.sliding_window)) if windowed else dict(CAUSAL),
            layer_masks=names if len(names) > 1 else None,
            attn_softcap=hf.attn_logit_softcapping,
            final_softcap=hf.final_logit_softcapping,
            init_std=hf.initializer_range,
            **special_tokens(hf),
        )

    def rules(self, c: ModelConfig) -> list[Rule]:
        r: list[Rule] = [Same("tok_embed.weight", "model.embed_tokens.weight")]
        for i in range(c.n_layer):
            h, o = f"model.layers.{i}.", f"decoder.blocks.{i}."
            a = h + "self_attn."
            # sandwich: the pre-norm is <sublayer>_norm, the post-norm <sublayer>_res.norm
            r += linear(o + "attn_norm", h + "input_layernorm", False)
            r += linear(o + "attn_res.norm", h + "post_attention_layernorm", False)
            r += linear(o + "ffn_norm", h + "pre_feedforward_layernorm", False)
            r += linear(o + "ffn_res.norm", h + "post_feedforward_layernorm", False)
            # GQA: q_proj has H·D rows, k_proj and v_proj K·D each; stacked as [q | k | v]
            r += fused_linear(
                o + "attn.qkv", (a + "q_proj", a + "k_proj", a + "v_proj"), qkv_sizes(c), False
            )
            r += linear(o + "attn.out", a + "o_proj", False)
            r += linear(o + "ffn.gate", h + "mlp.gate_proj", False)
            r += linear(o + "ffn.up", h + "mlp.up_proj", False)
            r += linear(o + "ffn.down", h + "mlp.down_proj", False)
        r += linear("decoder.final_norm", "model.norm", False)
        return r if c.tie_embeddings else r + [Same("head.weight", "lm_head.weight")]

    def export_problems(self, c: ModelConfig) -> list[str]:
        p = super().export_problems(c)
        node = c.mask or CAUSAL
        p += _node_problems("mask", node, CAUSAL if node["name"] == "causal" else WINDOWED)
        for name in c.layer_masks or []:
            if name not in LAYER_TYPES.values():
                p.append(f"model.layer_masks entry '{name}' (needs sliding_window or causal)")
        return p

    def hf_config(self, c: ModelConfig) -> Any:
        from transformers import Gemma2Config

        ours = {v: k for k, v in LAYER_TYPES.items()}
        # model.layer_masks cycled over the layers; without it every layer uses model.mask
        nodes = c.layer_mask_nodes(c.n_layer) if c.layer_masks else [c.mask or CAUSAL] * c.n_layer
        types = [ours[n["name"]] for n in nodes]
        scalar: float = c.head_dim if c.attn_scale is None else c.attn_scale**-2
        shared = self.hf_kwargs(c)  # Llama's keys; Gemma 2 names its activation, has no bias
        del shared["hidden_act"]
        shared["attention_bias"] = False
        return Gemma2Config(
            **shared,
            hidden_activation={v: k for k, v in GELUS.items()}[setting(FFNS, c.ffn, "approximate")],
            query_pre_attn_scalar=round(scalar) if math.isclose(scalar, round(scalar)) else scalar,
            # a model without sliding layers: the value is not read
            sliding_window=(c.mask or {}).get("window", c.max_seq_len),
            layer_types=types,
            attn_logit_softcapping=c.attn_softcap,
            final_logit_softcapping=c.final_softcap,
        )

    def hf_model_class(self) -> type[nn.Module]:
        from transformers import Gemma2ForCausalLM

        return Gemma2ForCausalLM
