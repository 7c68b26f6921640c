"""BERT (Devlin et al. 2019) as a masked LM <-> our encoder_only: post-norm, embedding LayerNorm,
exact GELU, MLM head (dense, GELU, LayerNorm, tied decoder + bias).

Segment (token type) embeddings are folded into the position table (``FoldedSegment``), so
inputs are single-segment. The pooler and the next-sentence head are dropped (the MLM does
not use them).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from src.models.components.norms import NORMS
from src.models.config import ModelConfig
from src.models.hf.adapter import ADAPTERS, Adapter, special_tokens, special_tokens_to_hf
from src.models.hf.architecture import ANY, Architecture, setting
from src.models.hf.rules import FoldedSegment, Rule, Same, fused_linear, linear, qkv_sizes


@ADAPTERS.register("bert")
class BertAdapter(Adapter):
    """BertForMaskedLM (also reads BertForPreTraining checkpoints, dropping their NSP head)."""

    arch = Architecture(
        "encoder_only",
        "post",
        position={"name": "learned"},
        norm={"name": "layernorm", "eps": ANY},
        ffn={"name": "gelu", "approximate": "none"},
        mask={"name": "bidirectional"},
        embedding_norm=True,
    )
    prefix, outside_prefix = "bert.", ("cls.",)
    dropped = (
        (
            r"^bert\.pooler\.",
            "the [CLS] pooler feeds next-sentence prediction / classification, not the MLM head",
        ),
        (r"^cls\.seq_relationship\.", "next-sentence-prediction head of BertForPreTraining"),
        (r"embeddings\.position_ids$", "index buffer of older checkpoints"),
    )

    def config(self, hf: Any) -> ModelConfig:
        self.need(
            hf.hidden_act == "gelu",
            f"hidden_act={hf.hidden_act!r}: our MLM head transform uses exact GELU ('gelu')",
        )
        self.need(
            getattr(hf, "position_embedding_type", "absolute") == "absolute",
            f"position_embedding_type={getattr(hf, 'position_embedding_type', None)!r} (relative) "
            "is not supported",
        )
        self.need(
            not getattr(hf, "is_decoder", False) and not getattr(hf, "add_cross_attention", False),
            "is_decoder / add_cross_attention (BERT as a causal decoder) is not supported",
        )
        return ModelConfig(
            family="encoder_only",
            vocab_size=hf.vocab_size,
            d_model=hf.hidden_size,
            n_layer=hf.num_hidden_layers,
            n_head=hf.num_attention_heads,
            d_ff=hf.intermediate_size,
            max_seq_len=hf.max_position_embeddings,
            dropout=float(hf.hidden_dropout_prob),
            bias=True,
            tie_embeddings=getattr(hf, "tie_word_embeddings", True),
            norm_placement="post",
            embedding_norm=True,
            position={"name": "learned"},
            norm={"name": "layernorm", "eps": hf.layer_norm_eps},
            ffn={"name": "gelu", "approximate": "none"},
            mask={"name": "bidirectional"},
            init_std=hf.initializer_range,
            **special_tokens(hf),
        )

    def rules(self, c: ModelConfig) -> list[Rule]:
        e = "bert.embeddings."
        r: list[Rule] = [
            Same("tok_embed.weight", e + "word_embeddings.weight"),
            FoldedSegment(
                "encoder.position.table.weight",
                e + "position_embeddings.weight",
                e + "token_type_embeddings.weight",
            ),
            *linear("encoder.embed_norm", e + "LayerNorm", True),
        ]
        for i in range(c.n_layer):
            h, o = f"bert.encoder.layer.{i}.", f"encoder.blocks.{i}."
            a = h + "attention.self."
            r += fused_linear(
                o + "attn.qkv", (a + "query", a + "key", a + "value"), qkv_sizes(c), True
            )
            r += linear(o + "attn.out", h + "attention.output.dense", True)
            # post-norm: after the residual add
            r += linear(o + "attn_norm", h + "attention.output.LayerNorm", True)
            r += linear(o + "ffn.up", h + "intermediate.dense", True)
            r += linear(o + "ffn.down", h + "output.dense", True)
            r += linear(o + "ffn_norm", h + "output.LayerNorm", True)
        r += linear("transform.dense", "cls.predictions.transform.dense", True)
        r += linear("transform.norm", "cls.predictions.transform.LayerNorm", True)
        r += [Same("head.bias", "cls.predictions.bias")]
        return (
            r if c.tie_embeddings else r + [Same("head.weight", "cls.predictions.decoder.weight")]
        )

    def copies(self, c: ModelConfig) -> dict[str, str]:
        tied = {"cls.predictions.decoder.weight": "tok_embed.weight"} if c.tie_embeddings else {}
        # the decoder's bias is cls.predictions.bias
        return tied | {"cls.predictions.decoder.bias": "head.bias"}

    def hf_config(self, c: ModelConfig) -> Any:
        from transformers import BertConfig

        return BertConfig(
            vocab_size=c.vocab_size,
            hidden_size=c.d_model,
            num_hidden_layers=c.n_layer,
            num_attention_heads=c.n_head,
            intermediate_size=c.d_ff,
            hidden_act="gelu",
            hidden_dropout_prob=c.dropout,
            attention_probs_dropout_prob=c.dropout,
            max_position_embeddings=c.max_seq_len,
            type_vocab_size=2,
            layer_norm_eps=setting(NORMS, c.norm, "eps"),
            initializer_range=c.init_std,
            tie_word_embeddings=c.tie_embeddings,
            **special_tokens_to_hf(c),
        )

    def hf_model_class(self) -> type[nn.Module]:
        from transformers import BertForMaskedLM

        return BertForMaskedLM
