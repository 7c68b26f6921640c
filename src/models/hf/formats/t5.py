"""T5 (Raffel et al. 2020) <-> our encoder_decoder: pre-norm with T5's RMS norm (no mean, no bias),
no biases anywhere, a bucketed relative position bias per stack (``t5_bias``, stored in block 0's
self-attention and shared by the stack's layers), unscaled attention scores (``attn_scale: 1.0``)
and heads of ``d_kv`` channels (``d_head``) whose product with the head count may differ from
d_model.

Two released lines, told apart by how the head reads the decoder's output:

* v1.0 (t5-small … t5-11b): ReLU FFN (``feed_forward_proj: relu``), the head tied to the shared
  embedding and fed ``hidden × d_model^-0.5`` (``scale_head``; transformers'
  ``scale_decoder_outputs``);
* v1.1 / flan-T5: gated GELU (``gated-gelu``: our ``geglu`` with the tanh approximation), an untied
  ``lm_head`` and no scaling (``tie_word_embeddings: false`` in their config.json).

transformers 5 always ties T5's head in the config object (``tie_word_embeddings`` reads true) and
keeps the v1.0/v1.1 distinction in ``scale_decoder_outputs``, which is what ``config`` reads: scaled
means tied, unscaled means untied with its own ``lm_head.weight``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from src.errors import HFConversionError
from src.models.components.norms import NORMS
from src.models.components.positions import POSITIONS
from src.models.config import ModelConfig
from src.models.hf.adapter import ADAPTERS, Adapter, special_tokens, special_tokens_to_hf
from src.models.hf.architecture import ANY, Architecture, setting
from src.models.hf.rules import Checkpoint, Rule, Same, fused_linear, linear, qkv_sizes

#: T5's ``feed_forward_proj`` -> our ffn node (both directions).
FFN_PROJ: dict[str, dict[str, Any]] = {
    "relu": {"name": "relu"},  # v1.0
    "gelu": {"name": "gelu", "approximate": "none"},
    "gated-gelu": {"name": "geglu", "approximate": "tanh"},  # v1.1 / flan: gelu_new
    "gated-silu": {"name": "swiglu"},
}


@dataclass(frozen=True)
class UntiedHead(Same):
    """v1.1's own ``lm_head.weight``; a checkpoint without one ties its head without the v1.0
    scale."""

    def load(self, ckpt: Checkpoint) -> Tensor:
        t = ckpt.take_optional(self.theirs)
        if t is None:
            raise HFConversionError(
                "model_type 't5': scale_decoder_outputs=False (T5 v1.1) but the checkpoint has no "
                "lm_head.weight: its head is tied to `shared` without the d_model^-0.5 scale "
                "(transformers 5 ties T5 heads by default). v1.1 / flan-T5 checkpoints store their "
                "own lm_head; save the model with config.tie_word_embeddings=False"
            )
        return t


@ADAPTERS.register("t5")
class T5Adapter(Adapter):
    """T5ForConditionalGeneration; ``encoder/decoder.embed_tokens`` (and a tied ``lm_head``) are
    copies of ``shared``."""

    arch = Architecture(
        "encoder_decoder",
        "pre",
        position={"name": "t5_bias", "num_buckets": ANY, "max_distance": ANY},
        norm={"name": "rmsnorm", "eps": ANY},
        ffn={"name": "relu"},
        bias=False,
        more={"d_head": ANY, "attn_scale": 1.0, "scale_head": ANY},
    )
    prefix, outside_prefix = "", ()

    def config(self, hf: Any) -> ModelConfig:
        proj = hf.feed_forward_proj
        self.need(
            proj in FFN_PROJ,
            f"feed_forward_proj={proj!r} is not supported; supported: {sorted(FFN_PROJ)}",
        )
        self.need(
            hf.is_encoder_decoder,
            "is_encoder_decoder=False (a T5 encoder or decoder alone) is not supported",
        )
        scaled = bool(
            getattr(hf, "scale_decoder_outputs", getattr(hf, "tie_word_embeddings", True))
        )
        return ModelConfig(
            family="encoder_decoder",
            vocab_size=hf.vocab_size,
            d_model=hf.d_model,
            n_layer=hf.num_layers,
            n_encoder_layer=hf.num_layers,
            n_decoder_layer=hf.num_decoder_layers,
            n_head=hf.num_heads,
            d_head=hf.d_kv,
            attn_scale=1.0,
            d_ff=hf.d_ff,
            max_seq_len=int(getattr(hf, "n_positions", None) or 512),
            dropout=float(hf.dropout_rate),
            bias=False,
            tie_embeddings=scaled,
            scale_head=scaled,
            norm_placement="pre",
            position={
                "name": "t5_bias",
                "num_buckets": hf.relative_attention_num_buckets,
                "max_distance": hf.relative_attention_max_distance,
            },
            norm={"name": "rmsnorm", "eps": hf.layer_norm_epsilon},
            ffn=dict(FFN_PROJ[proj]),
            mask=None,
            pad_token_id=hf.pad_token_id,
            bos_token_id=None,
            eos_token_id=special_tokens(hf, bos=False)["eos_token_id"],
            decoder_start_token_id=getattr(hf, "decoder_start_token_id", None)
            or hf.pad_token_id,  # T5 starts from <pad>
        )

    def rules(self, c: ModelConfig) -> list[Rule]:
        r: list[Rule] = [Same("tok_embed.weight", "shared.weight")]
        gated = c.ffn["name"] in ("geglu", "swiglu")
        for stack, n in (("encoder", c.encoder_layers), ("decoder", c.decoder_layers)):
            r.append(
                Same(
                    f"{stack}.position.table.weight",
                    f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                )
            )
            for i in range(n):
                h, o = f"{stack}.block.{i}.layer.", f"{stack}.blocks.{i}."
                a = h + "0.SelfAttention."
                r += linear(o + "attn_norm", h + "0.layer_norm", False)
                r += fused_linear(o + "attn.qkv", (a + "q", a + "k", a + "v"), qkv_sizes(c), False)
                r += linear(o + "attn.out", a + "o", False)
                f = 1
                # layer 1: cross-attention, Q from the decoder, [k | v] over the encoder output
                if stack == "decoder":
                    x = h + "1.EncDecAttention."
                    r += linear(o + "cross_norm", h + "1.layer_norm", False)
                    r += linear(o + "cross_attn.q", x + "q", False)
                    r += fused_linear(
                        o + "cross_attn.kv", (x + "k", x + "v"), qkv_sizes(c)[1:], False
                    )
                    r += linear(o + "cross_attn.out", x + "o", False)
                    f = 2
                d = f"{h}{f}.DenseReluDense."
                r += linear(o + "ffn_norm", f"{h}{f}.layer_norm", False)
                if gated:  # wi_0 is activated, wi_1 multiplies it
                    r += linear(o + "ffn.gate", d + "wi_0", False) + linear(
                        o + "ffn.up", d + "wi_1", False
                    )
                else:
                    r += linear(o + "ffn.up", d + "wi", False)
                r += linear(o + "ffn.down", d + "wo", False)
            r += linear(f"{stack}.final_norm", f"{stack}.final_layer_norm", False)
        return r if c.tie_embeddings else r + [UntiedHead("head.weight", "lm_head.weight")]

    def copies(self, c: ModelConfig) -> dict[str, str]:
        shared = {f"{s}.embed_tokens.weight": "tok_embed.weight" for s in ("encoder", "decoder")}
        return shared | super().copies(c)

    def export_problems(self, c: ModelConfig) -> list[str]:
        ffn = next((p for p in FFN_PROJ.values() if p["name"] == c.ffn["name"]), FFN_PROJ["relu"])
        p = dataclasses.replace(self.arch, ffn=ffn).problems(c)
        if c.scale_head != c.tie_embeddings:
            p.append(
                f"model.scale_head={c.scale_head} with model.tie_embeddings={c.tie_embeddings} (T5 "
                "scales the head's input exactly when the head is tied: v1.0 both true, v1.1 both "
                "false)"
            )
        return p

    def hf_config(self, c: ModelConfig) -> Any:
        from transformers import T5Config

        proj = next(k for k, v in FFN_PROJ.items() if v["name"] == c.ffn["name"])
        cfg = T5Config(
            vocab_size=c.vocab_size,
            d_model=c.d_model,
            d_kv=c.head_dim,
            d_ff=c.d_ff,
            num_layers=c.encoder_layers,
            num_decoder_layers=c.decoder_layers,
            num_heads=c.n_head,
            relative_attention_num_buckets=setting(POSITIONS, c.position, "num_buckets"),
            relative_attention_max_distance=setting(POSITIONS, c.position, "max_distance"),
            dropout_rate=c.dropout,
            layer_norm_epsilon=setting(NORMS, c.norm, "eps"),
            feed_forward_proj=proj,
            n_positions=c.max_seq_len,
            tie_word_embeddings=c.tie_embeddings,
            **special_tokens_to_hf(c),
            decoder_start_token_id=c.decoder_start_token_id
            if c.decoder_start_token_id is not None
            else c.pad_token_id,
        )
        # T5Config forces True; v1.1 keeps its own lm_head
        cfg.tie_word_embeddings = c.tie_embeddings
        return cfg

    def hf_model_class(self) -> type[nn.Module]:
        from transformers import T5ForConditionalGeneration

        return T5ForConditionalGeneration
