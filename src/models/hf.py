"""Hugging Face interop: load transformers checkpoints into our models, and export them back.

::

    config.json ──config_from_hf──▶ ModelConfig ──build_model──▶ TransformerModel
    model.safetensors ──adapter rules (rename, transpose, fuse)──▶ state dict ──load_state_dict(strict)──┘
    TransformerModel ──to_hf──▶ config.json + model.safetensors (loads with transformers' Auto* classes)

One state-dict adapter per external format (as torchtitan), chosen by the checkpoint's
``model_type``: ``gpt2``, ``llama``, ``bert``, ``marian``. An adapter is a list of rules,
each naming one of our tensors and the Hugging Face tensor(s) it comes from, so the same
list converts in both directions. Loading is strict both ways: every parameter of our
model is filled (``load_state_dict(strict=True)``) and every tensor of the checkpoint is
either consumed by a rule, verified as a copy of one (tied embeddings), or matched by
the adapter's explicit list of dropped tensors with the reason. No code from the
checkpoint is ever run (there is no ``trust_remote_code``): we read config.json and
tensors only.
"""
from __future__ import annotations

import inspect
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from src.models.builder import build_model
from src.models.components.ffn import FFNS
from src.models.components.norms import NORMS
from src.models.components.positions import POSITIONS, sinusoid_table
from src.models.config import ModelConfig
from src.models.families import TransformerModel

log = logging.getLogger(__name__)


class HFConversionError(ValueError):
    """A checkpoint or config we cannot convert exactly; the message names the key and the fix."""


# ----------------------------------------------------------------------------------------
# Rules: one of our tensors <-> the Hugging Face tensor(s) it is made of
# ----------------------------------------------------------------------------------------
class Checkpoint:
    """The Hugging Face tensors being converted. Each is taken at most once; leftovers are an error."""

    def __init__(self, tensors: Mapping[str, Tensor], model_type: str) -> None:
        self.model_type = model_type
        self.tensors = dict(tensors)
        self.dropped: list[str] = []

    def take(self, key: str) -> Tensor:
        if key not in self.tensors:
            near = sorted(self.tensors)[:6]
            raise HFConversionError(
                f"{self.model_type} checkpoint has no tensor '{key}' (it holds {len(self.tensors)} more, e.g. {near}); "
                f"is it a checkpoint of a different architecture or of the base model without the task head?"
            )
        return self.tensors.pop(key)

    def take_optional(self, key: str) -> Tensor | None:
        return self.tensors.pop(key, None)

    def drop(self, pattern: str) -> None:
        """Discard tensors whose key matches ``pattern`` (the adapter says why)."""
        for key in [k for k in self.tensors if re.search(pattern, k)]:
            self.dropped.append(key)
            del self.tensors[key]

    def finish(self) -> None:
        if self.tensors:
            raise HFConversionError(
                f"{self.model_type} checkpoint has tensors that no conversion rule consumes: {sorted(self.tensors)[:10]}"
                f"{' …' if len(self.tensors) > 10 else ''}. Converting would silently lose weights; add a rule (or an "
                f"explicit drop with its reason) to the '{self.model_type}' adapter in src/models/hf.py"
            )


@dataclass(frozen=True)
class Same:
    """One tensor with the same layout on both sides."""

    ours: str
    theirs: str

    def load(self, ckpt: Checkpoint) -> Tensor:
        return ckpt.take(self.theirs)

    def save(self, x: Tensor) -> dict[str, Tensor]:
        return {self.theirs: x}


@dataclass(frozen=True)
class Transposed(Same):
    """GPT-2's ``Conv1D`` stores its weight as [in, out] (y = x W + b); ``nn.Linear`` stores
    [out, in] (y = x Wᵀ + b), so the weight is transposed (nanoGPT's ``from_pretrained``)."""

    def load(self, ckpt: Checkpoint) -> Tensor:
        return ckpt.take(self.theirs).t()  # [in, out] -> [out, in]

    def save(self, x: Tensor) -> dict[str, Tensor]:
        return {self.theirs: x.t()}  # [out, in] -> [in, out]


@dataclass(frozen=True)
class Fused:
    """Separate projections stacked along the output dim: [q | k | v] for our ``attn.qkv``
    (H·D, K·D, K·D rows), [k | v] for ``cross_attn.kv``; biases likewise."""

    ours: str
    theirs: tuple[str, ...]
    sizes: tuple[int, ...]

    def load(self, ckpt: Checkpoint) -> Tensor:
        parts = [ckpt.take(k) for k in self.theirs]
        got = tuple(p.shape[0] for p in parts)
        if got != self.sizes:
            raise HFConversionError(f"{self.theirs} have {got} rows, but our {self.ours} expects {self.sizes}")
        return torch.cat(parts, dim=0)  # n × [rows_i, C] -> [Σ rows_i, C]

    def save(self, x: Tensor) -> dict[str, Tensor]:
        return dict(zip(self.theirs, x.split(list(self.sizes), dim=0)))  # [Σ rows_i, C] -> n × [rows_i, C]


@dataclass(frozen=True)
class FoldedSegment:
    """BERT adds ``token_type_embeddings[segment]`` to every token. We have no segment
    embeddings, and with all segment ids 0 (single sentences, our MLM) that row is a constant,
    so it is folded into the position table: table[p] = position[p] + token_type[0].
    Exported, the position table goes back unchanged and token types become zero rows."""

    ours: str
    position: str
    token_type: str
    n_types: int = 2

    def load(self, ckpt: Checkpoint) -> Tensor:
        pos, types = ckpt.take(self.position), ckpt.take(self.token_type)  # [P, C], [n_types, C]
        return pos + types[0]  # rows 1.. (second segment) are unused by single-segment inputs

    def save(self, x: Tensor) -> dict[str, Tensor]:
        return {self.position: x, self.token_type: x.new_zeros(self.n_types, x.shape[1])}


@dataclass(frozen=True)
class Constant:
    """A Hugging Face tensor we compute instead of storing (a sinusoid table, a zero bias).
    Loading checks the checkpoint's copy (if any) against it, so a trained value is never lost."""

    theirs: str
    value: Tensor
    why: str
    ours: None = None

    def load(self, ckpt: Checkpoint) -> None:
        t = ckpt.take_optional(self.theirs)
        atol = 1e-4 if t is not None and t.dtype == torch.float32 else 1e-2  # half-precision checkpoints round
        if t is not None and not torch.allclose(t.float(), self.value.float(), atol=atol, rtol=0):
            raise HFConversionError(f"{ckpt.model_type} tensor '{self.theirs}' differs from what we compute: {self.why}")

    def save(self, x: None) -> dict[str, Tensor]:
        return {self.theirs: self.value}


Rule = Same | Fused | FoldedSegment | Constant


def linear(ours: str, theirs: str, bias: bool, rule: type[Same] = Same) -> list[Rule]:
    out: list[Rule] = [rule(f"{ours}.weight", f"{theirs}.weight")]
    return out + [Same(f"{ours}.bias", f"{theirs}.bias")] if bias else out  # biases are 1-D: never transposed


def fused_linear(ours: str, theirs: tuple[str, ...], sizes: tuple[int, ...], bias: bool) -> list[Rule]:
    out: list[Rule] = [Fused(f"{ours}.weight", tuple(f"{t}.weight" for t in theirs), sizes)]
    return out + [Fused(f"{ours}.bias", tuple(f"{t}.bias" for t in theirs), sizes)] if bias else out


def qkv_sizes(c: ModelConfig) -> tuple[int, int, int]:
    return c.n_head * c.head_dim, c.kv_heads * c.head_dim, c.kv_heads * c.head_dim


# ----------------------------------------------------------------------------------------
# Adapters: one per Hugging Face model_type
# ----------------------------------------------------------------------------------------
#: transformers ``activation_function`` / ``hidden_act`` -> our ffn node (both directions).
ACTIVATIONS: dict[str, dict[str, Any]] = {
    "gelu_new": {"name": "gelu", "approximate": "tanh"},  # GPT-2's tanh approximation
    "gelu_pytorch_tanh": {"name": "gelu", "approximate": "tanh"},
    "gelu": {"name": "gelu", "approximate": "none"},  # exact erf form (BERT)
    "relu": {"name": "relu"},
    "silu": {"name": "silu"},
    "swish": {"name": "silu"},  # Marian's name for SiLU
}


def _first(token: int | list[int] | None) -> int | None:
    """transformers allows several eos ids (Llama 3); our config holds one: the first."""
    return token[0] if isinstance(token, (list, tuple)) and token else token  # type: ignore[return-value]


def _default(registry: Any, node: Mapping[str, Any], key: str) -> Any:
    """A component's setting: the node's value, else its constructor's default."""
    if key in node:
        return node[key]
    p = inspect.signature(registry.get(node["name"]).__init__).parameters.get(key)
    return None if p is None or p.default is inspect.Parameter.empty else p.default


def _ffn_to_hf(c: ModelConfig) -> str | None:
    """Our ffn node -> transformers activation name, or None when there is none for it."""
    node: dict[str, Any] = {"name": c.ffn["name"]}
    if c.ffn["name"] == "gelu":
        node["approximate"] = _default(FFNS, c.ffn, "approximate")
    if set(c.ffn) - set(node):  # e.g. a custom key transformers has no field for
        return None
    return next((act for act, ours in ACTIVATIONS.items() if ours == node), None)


class Adapter:
    """Converts one Hugging Face ``model_type``. Subclasses define the config mapping and rules.

    Rules name Hugging Face keys as the task model saves them (``transformer.h.0…`` for
    GPT2LMHeadModel); a checkpoint of the bare base model (``h.0…``) gets ``prefix`` added first.
    """

    model_type: str
    family: str
    prefix: str  # the base model's attribute inside the task model ("transformer.")
    outside_prefix: tuple[str, ...] = ()  # task-head keys that never carry the prefix
    #: (regex, reason): checkpoint tensors we knowingly discard.
    dropped: tuple[tuple[str, str], ...] = ()

    def config(self, hf: Any) -> ModelConfig:
        raise NotImplementedError

    def rules(self, c: ModelConfig) -> list[Rule]:
        raise NotImplementedError

    def copies(self, c: ModelConfig) -> dict[str, str]:
        """Hugging Face keys holding copies of one of our tensors (tied weights): {theirs: ours}."""
        return {"lm_head.weight": "tok_embed.weight"} if c.tie_embeddings else {}

    def export_problems(self, c: ModelConfig) -> list[str]:
        """Why ``c`` cannot be written as this model_type (empty when it can)."""
        raise NotImplementedError

    def hf_config(self, c: ModelConfig) -> Any:
        raise NotImplementedError

    def hf_model_class(self) -> type[nn.Module]:
        raise NotImplementedError

    def need(self, cond: bool, msg: str) -> None:
        if not cond:
            raise HFConversionError(f"model_type '{self.model_type}': {msg}")


def _common_export_problems(c: ModelConfig, family: str, placement: str, position: str, norm: str) -> list[str]:
    problems = []
    for key, want in (("family", family), ("norm_placement", placement)):
        if getattr(c, key) != want:
            problems.append(f"model.{key}={getattr(c, key)!r} (needs {want!r})")
    if c.position["name"] != position:
        problems.append(f"model/position={c.position['name']} (needs {position})")
    if c.norm["name"] != norm:
        problems.append(f"model/norm={c.norm['name']} (needs {norm})")
    return problems


class GPT2Adapter(Adapter):
    """GPT-2 (Radford et al. 2019): pre-norm, learned positions, tanh-GELU, tied head."""

    model_type, family, prefix, outside_prefix = "gpt2", "decoder_only", "transformer.", ("lm_head.",)
    dropped = ((r"\.attn\.(bias|masked_bias)$", "causal-mask buffers of older checkpoints; our masks are built on the fly"),)

    def config(self, hf: Any) -> ModelConfig:
        self.need(hf.scale_attn_weights, "scale_attn_weights=False (unscaled scores) is not supported; we always divide by √D")
        self.need(not hf.scale_attn_by_inverse_layer_idx,
                  "scale_attn_by_inverse_layer_idx=True (scores / (layer+1), Mistral/Stanford-CRFM) is not supported")
        self.need(not hf.reorder_and_upcast_attn,
                  "reorder_and_upcast_attn=True is not supported (it changes mixed-precision numerics, not the maths; "
                  "set it to false in config.json if that is acceptable)")
        self.need(not hf.add_cross_attention, "add_cross_attention=True (GPT-2 as a seq2seq decoder) is not supported")
        self.need(hf.activation_function in ACTIVATIONS,
                  f"activation_function={hf.activation_function!r} is not mapped; known: {sorted(ACTIVATIONS)}")
        return ModelConfig(
            family="decoder_only", vocab_size=hf.vocab_size, d_model=hf.n_embd, n_layer=hf.n_layer, n_head=hf.n_head,
            d_ff=hf.n_inner or 4 * hf.n_embd, max_seq_len=hf.n_positions, dropout=float(hf.resid_pdrop), bias=True,
            tie_embeddings=getattr(hf, "tie_word_embeddings", True), norm_placement="pre",
            position={"name": "learned"}, norm={"name": "layernorm", "eps": hf.layer_norm_epsilon},
            ffn=dict(ACTIVATIONS[hf.activation_function]), mask={"name": "causal"}, init_std=hf.initializer_range,
            pad_token_id=hf.pad_token_id, bos_token_id=hf.bos_token_id, eos_token_id=_first(hf.eos_token_id),
        )

    def rules(self, c: ModelConfig) -> list[Rule]:
        r: list[Rule] = [Same("tok_embed.weight", "transformer.wte.weight"),
                         Same("decoder.position.table.weight", "transformer.wpe.weight")]
        for i in range(c.n_layer):
            h, o = f"transformer.h.{i}.", f"decoder.blocks.{i}."
            r += linear(o + "attn_norm", h + "ln_1", True)
            # c_attn is already fused [C, 3C] with output columns [q | k | v]: one transpose gives our qkv rows
            r += linear(o + "attn.qkv", h + "attn.c_attn", True, Transposed)
            r += linear(o + "attn.out", h + "attn.c_proj", True, Transposed)
            r += linear(o + "ffn_norm", h + "ln_2", True)
            r += linear(o + "ffn.up", h + "mlp.c_fc", True, Transposed)
            r += linear(o + "ffn.down", h + "mlp.c_proj", True, Transposed)
        r += linear("decoder.final_norm", "transformer.ln_f", True)
        return r if c.tie_embeddings else r + [Same("head.weight", "lm_head.weight")]

    def export_problems(self, c: ModelConfig) -> list[str]:
        p = _common_export_problems(c, "decoder_only", "pre", "learned", "layernorm")
        p += [] if c.bias else ["model.bias=False (GPT-2 has biases everywhere)"]
        p += [] if c.kv_heads == c.n_head else [f"model.n_kv_head={c.n_kv_head} (GPT-2 has no GQA)"]
        p += [] if _ffn_to_hf(c) else [f"model/ffn={c.ffn} (no transformers activation_function for it)"]
        p += ["model.embedding_norm=True"] if c.embedding_norm else []
        p += ["model.scale_embeddings=True"] if c.scale_embeddings else []
        p += [] if (c.mask or {"name": "causal"})["name"] == "causal" else [f"model/mask={c.mask['name']}"]  # type: ignore[index]
        return p

    def hf_config(self, c: ModelConfig) -> Any:
        from transformers import GPT2Config

        return GPT2Config(
            vocab_size=c.vocab_size, n_positions=c.max_seq_len, n_embd=c.d_model, n_layer=c.n_layer, n_head=c.n_head,
            n_inner=c.d_ff, activation_function=_ffn_to_hf(c), resid_pdrop=c.dropout, embd_pdrop=c.dropout,
            attn_pdrop=c.dropout, layer_norm_epsilon=_default(NORMS, c.norm, "eps"), initializer_range=c.init_std,
            bos_token_id=c.bos_token_id, eos_token_id=c.eos_token_id, pad_token_id=c.pad_token_id,
            tie_word_embeddings=c.tie_embeddings, architectures=["GPT2LMHeadModel"],
        )

    def hf_model_class(self) -> type[nn.Module]:
        from transformers import GPT2LMHeadModel

        return GPT2LMHeadModel


class LlamaAdapter(Adapter):
    """Llama (Touvron et al. 2023): RMSNorm, SwiGLU, RoPE, GQA, no biases, untied head.

    Hugging Face Llama checkpoints already store q/k rows permuted for the rotate_half
    pairing ([first half | second half] of each head), which is what our RoPE uses, so the
    projections are copied without permutation.
    """

    model_type, family, prefix, outside_prefix = "llama", "decoder_only", "model.", ("lm_head.",)
    dropped = ((r"rotary_emb\.inv_freq$", "RoPE frequencies of older checkpoints; recomputed from rope_theta"),)

    def config(self, hf: Any) -> ModelConfig:
        rope = dict(getattr(hf, "rope_parameters", None) or {})
        if not rope:  # transformers 4.x: rope_theta and rope_scaling at top level
            scaling = getattr(hf, "rope_scaling", None) or {}
            rope = {"rope_type": scaling.get("rope_type", scaling.get("type", "default")), "rope_theta": hf.rope_theta}
        self.need(rope.get("rope_type", "default") == "default",
                  f"rope scaling {rope} (rope_type={rope.get('rope_type')!r}) is not supported: our RoPE has no "
                  f"frequency scaling; use a checkpoint without rope_scaling")
        self.need(hf.hidden_act == "silu", f"hidden_act={hf.hidden_act!r} is not supported (our swiglu uses SiLU)")
        head_dim = getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads
        self.need(head_dim * hf.num_attention_heads == hf.hidden_size,
                  f"head_dim={head_dim} × num_attention_heads={hf.num_attention_heads} != hidden_size={hf.hidden_size}; "
                  f"our attention uses head_dim = d_model / n_head")
        self.need(bool(hf.attention_bias) == bool(getattr(hf, "mlp_bias", False)),
                  f"attention_bias={hf.attention_bias} with mlp_bias={getattr(hf, 'mlp_bias', False)}: our model.bias sets both at once")
        return ModelConfig(
            family="decoder_only", vocab_size=hf.vocab_size, d_model=hf.hidden_size, n_layer=hf.num_hidden_layers,
            n_head=hf.num_attention_heads, n_kv_head=hf.num_key_value_heads or hf.num_attention_heads,
            d_ff=hf.intermediate_size, max_seq_len=hf.max_position_embeddings, dropout=float(hf.attention_dropout),
            bias=bool(hf.attention_bias), tie_embeddings=bool(getattr(hf, "tie_word_embeddings", False)),
            norm_placement="pre", position={"name": "rope", "theta": float(rope["rope_theta"])},
            norm={"name": "rmsnorm", "eps": hf.rms_norm_eps}, ffn={"name": "swiglu"}, mask={"name": "causal"},
            init_std=hf.initializer_range, pad_token_id=hf.pad_token_id, bos_token_id=hf.bos_token_id,
            eos_token_id=_first(hf.eos_token_id),
        )

    def rules(self, c: ModelConfig) -> list[Rule]:
        r: list[Rule] = [Same("tok_embed.weight", "model.embed_tokens.weight")]
        for i in range(c.n_layer):
            h, o = f"model.layers.{i}.", f"decoder.blocks.{i}."
            a = h + "self_attn."
            r += linear(o + "attn_norm", h + "input_layernorm", False)
            # GQA: q_proj has H·D rows, k_proj and v_proj K·D each; stacked as [q | k | v]
            r += fused_linear(o + "attn.qkv", (a + "q_proj", a + "k_proj", a + "v_proj"), qkv_sizes(c), c.bias)
            r += linear(o + "attn.out", a + "o_proj", c.bias)
            r += linear(o + "ffn_norm", h + "post_attention_layernorm", False)
            r += linear(o + "ffn.gate", h + "mlp.gate_proj", c.bias)
            r += linear(o + "ffn.up", h + "mlp.up_proj", c.bias)
            r += linear(o + "ffn.down", h + "mlp.down_proj", c.bias)
        r += linear("decoder.final_norm", "model.norm", False)
        return r if c.tie_embeddings else r + [Same("head.weight", "lm_head.weight")]

    def export_problems(self, c: ModelConfig) -> list[str]:
        p = _common_export_problems(c, "decoder_only", "pre", "rope", "rmsnorm")
        p += [] if c.ffn["name"] == "swiglu" else [f"model/ffn={c.ffn['name']} (needs swiglu)"]
        if c.position["name"] == "rope" and _default(POSITIONS, c.position, "rotary_fraction") != 1.0:
            p.append("position.rotary_fraction != 1 (Llama rotates whole heads)")
        p += ["model.embedding_norm=True"] if c.embedding_norm else []
        p += ["model.scale_embeddings=True"] if c.scale_embeddings else []
        p += [] if (c.mask or {"name": "causal"})["name"] == "causal" else [f"model/mask={c.mask['name']}"]  # type: ignore[index]
        return p

    def hf_config(self, c: ModelConfig) -> Any:
        from transformers import LlamaConfig

        return LlamaConfig(
            vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.d_ff, num_hidden_layers=c.n_layer,
            num_attention_heads=c.n_head, num_key_value_heads=c.kv_heads, head_dim=c.head_dim, hidden_act="silu",
            max_position_embeddings=c.max_seq_len, rms_norm_eps=_default(NORMS, c.norm, "eps"),
            rope_theta=float(_default(POSITIONS, c.position, "theta")),  # transformers 5 moves it into rope_parameters
            attention_bias=c.bias, mlp_bias=c.bias, attention_dropout=c.dropout, initializer_range=c.init_std,
            tie_word_embeddings=c.tie_embeddings, bos_token_id=c.bos_token_id, eos_token_id=c.eos_token_id,
            pad_token_id=c.pad_token_id, architectures=["LlamaForCausalLM"],
        )

    def hf_model_class(self) -> type[nn.Module]:
        from transformers import LlamaForCausalLM

        return LlamaForCausalLM


class BertAdapter(Adapter):
    """BERT (Devlin et al. 2019) as a masked LM: post-norm, embedding LayerNorm, exact GELU,
    MLM head (dense, GELU, LayerNorm, tied decoder + bias). Segment (token type) embeddings
    are folded into the position table (``FoldedSegment``), so inputs are single-segment."""

    model_type, family, prefix, outside_prefix = "bert", "encoder_only", "bert.", ("cls.",)
    dropped = (
        (r"^bert\.pooler\.", "the [CLS] pooler feeds next-sentence prediction / classification, not the MLM head"),
        (r"^cls\.seq_relationship\.", "next-sentence-prediction head of BertForPreTraining"),
        (r"embeddings\.position_ids$", "index buffer of older checkpoints"),
    )

    def config(self, hf: Any) -> ModelConfig:
        self.need(hf.hidden_act == "gelu", f"hidden_act={hf.hidden_act!r}: our MLM head transform uses exact GELU ('gelu')")
        self.need(getattr(hf, "position_embedding_type", "absolute") == "absolute",
                  f"position_embedding_type={getattr(hf, 'position_embedding_type', None)!r} (relative) is not supported")
        self.need(not getattr(hf, "is_decoder", False) and not getattr(hf, "add_cross_attention", False),
                  "is_decoder / add_cross_attention (BERT as a causal decoder) is not supported")
        return ModelConfig(
            family="encoder_only", vocab_size=hf.vocab_size, d_model=hf.hidden_size, n_layer=hf.num_hidden_layers,
            n_head=hf.num_attention_heads, d_ff=hf.intermediate_size, max_seq_len=hf.max_position_embeddings,
            dropout=float(hf.hidden_dropout_prob), bias=True, tie_embeddings=getattr(hf, "tie_word_embeddings", True),
            norm_placement="post", embedding_norm=True, position={"name": "learned"},
            norm={"name": "layernorm", "eps": hf.layer_norm_eps}, ffn={"name": "gelu", "approximate": "none"},
            mask={"name": "bidirectional"}, init_std=hf.initializer_range, pad_token_id=hf.pad_token_id,
            bos_token_id=hf.bos_token_id, eos_token_id=_first(hf.eos_token_id),
        )

    def rules(self, c: ModelConfig) -> list[Rule]:
        e = "bert.embeddings."
        r: list[Rule] = [
            Same("tok_embed.weight", e + "word_embeddings.weight"),
            FoldedSegment("encoder.position.table.weight", e + "position_embeddings.weight", e + "token_type_embeddings.weight"),
            *linear("encoder.embed_norm", e + "LayerNorm", True),
        ]
        for i in range(c.n_layer):
            h, o = f"bert.encoder.layer.{i}.", f"encoder.blocks.{i}."
            a = h + "attention.self."
            r += fused_linear(o + "attn.qkv", (a + "query", a + "key", a + "value"), qkv_sizes(c), True)
            r += linear(o + "attn.out", h + "attention.output.dense", True)
            r += linear(o + "attn_norm", h + "attention.output.LayerNorm", True)  # post-norm: after the residual add
            r += linear(o + "ffn.up", h + "intermediate.dense", True)
            r += linear(o + "ffn.down", h + "output.dense", True)
            r += linear(o + "ffn_norm", h + "output.LayerNorm", True)
        r += linear("transform.dense", "cls.predictions.transform.dense", True)
        r += linear("transform.norm", "cls.predictions.transform.LayerNorm", True)
        r += [Same("head.bias", "cls.predictions.bias")]
        return r if c.tie_embeddings else r + [Same("head.weight", "cls.predictions.decoder.weight")]

    def copies(self, c: ModelConfig) -> dict[str, str]:
        tied = {"cls.predictions.decoder.weight": "tok_embed.weight"} if c.tie_embeddings else {}
        return tied | {"cls.predictions.decoder.bias": "head.bias"}  # the decoder's bias is cls.predictions.bias

    def export_problems(self, c: ModelConfig) -> list[str]:
        p = _common_export_problems(c, "encoder_only", "post", "learned", "layernorm")
        p += [] if c.embedding_norm else ["model.embedding_norm=False (BERT normalises the embeddings)"]
        p += [] if c.bias else ["model.bias=False"]
        p += [] if c.kv_heads == c.n_head else [f"model.n_kv_head={c.n_kv_head}"]
        p += [] if _ffn_to_hf(c) == "gelu" else [f"model/ffn={c.ffn} (BERT needs exact gelu, approximate: none)"]
        p += ["model.scale_embeddings=True"] if c.scale_embeddings else []
        p += [] if (c.mask or {"name": "bidirectional"})["name"] == "bidirectional" else [f"model/mask={c.mask['name']}"]  # type: ignore[index]
        return p

    def hf_config(self, c: ModelConfig) -> Any:
        from transformers import BertConfig

        return BertConfig(
            vocab_size=c.vocab_size, hidden_size=c.d_model, num_hidden_layers=c.n_layer, num_attention_heads=c.n_head,
            intermediate_size=c.d_ff, hidden_act="gelu", hidden_dropout_prob=c.dropout,
            attention_probs_dropout_prob=c.dropout, max_position_embeddings=c.max_seq_len, type_vocab_size=2,
            layer_norm_eps=_default(NORMS, c.norm, "eps"), initializer_range=c.init_std, pad_token_id=c.pad_token_id,
            tie_word_embeddings=c.tie_embeddings, architectures=["BertForMaskedLM"],
        )

    def hf_model_class(self) -> type[nn.Module]:
        from transformers import BertForMaskedLM

        return BertForMaskedLM


class MarianAdapter(Adapter):
    """MarianMT (Junczys-Dowmunt et al. 2018): the 2017 post-norm encoder-decoder with one
    shared vocabulary, embeddings scaled by √C (``scale_embedding`` -> our ``scale_embeddings``)
    and fixed sinusoids in the [sin | cos] (concat) layout, which we compute rather than load."""

    model_type, family, prefix, outside_prefix = "marian", "encoder_decoder", "model.", ("lm_head.", "final_logits_bias")

    def config(self, hf: Any) -> ModelConfig:
        self.need(getattr(hf, "share_encoder_decoder_embeddings", True) and hf.decoder_vocab_size in (None, hf.vocab_size),
                  "unshared encoder/decoder embeddings (share_encoder_decoder_embeddings=False or decoder_vocab_size != "
                  "vocab_size) are not supported: our encoder_decoder has one token embedding")
        self.need(hf.encoder_attention_heads == hf.decoder_attention_heads and hf.encoder_ffn_dim == hf.decoder_ffn_dim,
                  "encoder and decoder must have the same attention heads and ffn dim (our model.n_head / model.d_ff)")
        self.need(hf.activation_function in ACTIVATIONS,
                  f"activation_function={hf.activation_function!r} is not mapped; known: {sorted(ACTIVATIONS)}")
        self.need(hf.d_model % 2 == 0, f"d_model={hf.d_model} is odd; Marian's odd-width sinusoid layout is not supported")
        for flag in ("normalize_before", "normalize_embedding", "add_final_layer_norm", "layernorm_embedding"):
            self.need(not getattr(hf, flag, False), f"{flag}=True (a pre-norm / BART-style variant) is not supported")
        return ModelConfig(
            family="encoder_decoder", vocab_size=hf.vocab_size, d_model=hf.d_model, n_layer=hf.encoder_layers,
            n_encoder_layer=hf.encoder_layers, n_decoder_layer=hf.decoder_layers, n_head=hf.encoder_attention_heads,
            d_ff=hf.encoder_ffn_dim, max_seq_len=hf.max_position_embeddings, dropout=float(hf.dropout), bias=True,
            tie_embeddings=getattr(hf, "tie_word_embeddings", True), norm_placement="post",
            scale_embeddings=bool(hf.scale_embedding), position={"name": "sinusoidal", "layout": "concat"},
            norm={"name": "layernorm", "eps": 1e-5},  # Marian's nn.LayerNorm default
            ffn=dict(ACTIVATIONS[hf.activation_function]), mask=None, init_std=hf.init_std,
            pad_token_id=hf.pad_token_id, bos_token_id=hf.bos_token_id, eos_token_id=_first(hf.eos_token_id),
            decoder_start_token_id=hf.decoder_start_token_id,  # Marian starts decoding from <pad>
        )

    def rules(self, c: ModelConfig) -> list[Rule]:
        table = sinusoid_table(c.max_seq_len, c.d_model, "concat")  # [P, C], what embed_positions holds
        r: list[Rule] = [Same("tok_embed.weight", "model.shared.weight")]
        for stack, n in (("encoder", c.encoder_layers), ("decoder", c.decoder_layers)):
            r.append(Constant(f"model.{stack}.embed_positions.weight", table, "Marian positions are fixed sinusoids"))
            for i in range(n):
                h, o = f"model.{stack}.layers.{i}.", f"{stack}.blocks.{i}."
                a = h + "self_attn."
                r += fused_linear(o + "attn.qkv", (a + "q_proj", a + "k_proj", a + "v_proj"), qkv_sizes(c), True)
                r += linear(o + "attn.out", a + "out_proj", True)
                r += linear(o + "attn_norm", h + "self_attn_layer_norm", True)
                if stack == "decoder":  # cross-attention: Q from the decoder, [k | v] fused over the encoder output
                    x = h + "encoder_attn."
                    r += linear(o + "cross_attn.q", x + "q_proj", True)
                    r += fused_linear(o + "cross_attn.kv", (x + "k_proj", x + "v_proj"), qkv_sizes(c)[1:], True)
                    r += linear(o + "cross_attn.out", x + "out_proj", True)
                    r += linear(o + "cross_norm", h + "encoder_attn_layer_norm", True)
                r += linear(o + "ffn.up", h + "fc1", True)
                r += linear(o + "ffn.down", h + "fc2", True)
                r += linear(o + "ffn_norm", h + "final_layer_norm", True)
        r.append(Constant("final_logits_bias", torch.zeros(1, c.vocab_size),
                          "a non-zero final_logits_bias has no place in our head (bias-free for encoder_decoder)"))
        return r if c.tie_embeddings else r + [Same("head.weight", "lm_head.weight")]

    def copies(self, c: ModelConfig) -> dict[str, str]:
        shared = {f"model.{s}.embed_tokens.weight": "tok_embed.weight" for s in ("encoder", "decoder")}
        return shared | super().copies(c)

    def export_problems(self, c: ModelConfig) -> list[str]:
        p = _common_export_problems(c, "encoder_decoder", "post", "sinusoidal", "layernorm")
        if c.position["name"] == "sinusoidal" and (_default(POSITIONS, c.position, "layout") != "concat"
                                                  or _default(POSITIONS, c.position, "base") != 10000.0):
            p.append("position layout/base (Marian needs layout: concat, base: 10000)")
        if c.norm["name"] == "layernorm" and _default(NORMS, c.norm, "eps") != 1e-5:
            p.append(f"norm.eps={_default(NORMS, c.norm, 'eps')} (Marian's LayerNorm eps is 1e-5)")
        p += [] if c.bias else ["model.bias=False"]
        p += [] if c.kv_heads == c.n_head else [f"model.n_kv_head={c.n_kv_head}"]
        p += [] if _ffn_to_hf(c) else [f"model/ffn={c.ffn} (no transformers activation_function for it)"]
        p += ["model.embedding_norm=True"] if c.embedding_norm else []
        return p

    def hf_config(self, c: ModelConfig) -> Any:
        from transformers import MarianConfig

        start = c.decoder_start_token_id if c.decoder_start_token_id is not None else c.pad_token_id
        return MarianConfig(
            vocab_size=c.vocab_size, decoder_vocab_size=c.vocab_size, max_position_embeddings=c.max_seq_len,
            encoder_layers=c.encoder_layers, decoder_layers=c.decoder_layers, encoder_ffn_dim=c.d_ff,
            decoder_ffn_dim=c.d_ff, encoder_attention_heads=c.n_head, decoder_attention_heads=c.n_head,
            activation_function=_ffn_to_hf(c), d_model=c.d_model, dropout=c.dropout, attention_dropout=c.dropout,
            init_std=c.init_std, scale_embedding=c.scale_embeddings, pad_token_id=c.pad_token_id,
            eos_token_id=c.eos_token_id, bos_token_id=c.bos_token_id, decoder_start_token_id=start,
            forced_eos_token_id=None, share_encoder_decoder_embeddings=True, tie_word_embeddings=c.tie_embeddings,
            architectures=["MarianMTModel"],
        )

    def hf_model_class(self) -> type[nn.Module]:
        from transformers import MarianMTModel

        return MarianMTModel


ADAPTERS: dict[str, Adapter] = {a.model_type: a for a in (GPT2Adapter(), LlamaAdapter(), BertAdapter(), MarianAdapter())}


def get_adapter(model_type: str | None) -> Adapter:
    if model_type not in ADAPTERS:
        raise HFConversionError(
            f"Hugging Face model_type {model_type!r} is not supported; supported: {', '.join(sorted(ADAPTERS))}. "
            f"Add a state-dict adapter for it in src/models/hf.py"
        )
    return ADAPTERS[model_type]


# ----------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------
def _hf_config_object(hf_config: Any) -> Any:
    """A transformers config object; a config.json dict gets transformers' own defaults for
    the keys it omits (``AutoConfig.for_model``, which runs no remote code)."""
    if not isinstance(hf_config, Mapping):
        return hf_config
    d = {k: v for k, v in hf_config.items() if k not in ("model_type", "transformers_version")}
    model_type = hf_config.get("model_type")
    get_adapter(model_type)  # fail on unsupported types before transformers does
    if "auto_map" in d:
        raise HFConversionError(f"config has auto_map {d['auto_map']}: custom (remote) code is never run; "
                                f"only the built-in {model_type} architecture is converted")
    from transformers import AutoConfig

    return AutoConfig.for_model(model_type, **d)


def config_from_hf(hf_config: Any) -> ModelConfig:
    """Our ModelConfig from a transformers config object or a config.json dict.

    Raises HFConversionError naming the model_type and the key for anything we cannot reproduce exactly.
    """
    hf = _hf_config_object(hf_config)
    adapter = get_adapter(getattr(hf, "model_type", None))
    cfg = adapter.config(hf)
    cfg.name = f"hf-{adapter.model_type}"
    cfg.validate()
    return cfg


def _read_tensors(folder: Path) -> dict[str, Tensor]:
    """model.safetensors (possibly sharded), else pytorch_model.bin (possibly sharded)."""
    from safetensors.torch import load_file

    def shards(index: Path) -> list[Path]:
        return [folder / f for f in sorted(set(json.loads(index.read_text())["weight_map"].values()))]

    if (folder / "model.safetensors").exists():
        files, load = [folder / "model.safetensors"], load_file
    elif (folder / "model.safetensors.index.json").exists():
        files, load = shards(folder / "model.safetensors.index.json"), load_file
    else:
        # weights_only=True: unpickling a .bin can run arbitrary code otherwise
        def load(p: Path) -> dict[str, Tensor]:
            return torch.load(p, map_location="cpu", weights_only=True)

        if (folder / "pytorch_model.bin").exists():
            files = [folder / "pytorch_model.bin"]
        elif (folder / "pytorch_model.bin.index.json").exists():
            files = shards(folder / "pytorch_model.bin.index.json")
        else:
            raise HFConversionError(
                f"{folder} has no model.safetensors, model.safetensors.index.json, pytorch_model.bin or "
                f"pytorch_model.bin.index.json (found: {sorted(p.name for p in folder.iterdir())})"
            )
    tensors: dict[str, Tensor] = {}
    for f in files:
        tensors.update(load(f))
    return tensors


def _resolve(name_or_path: str | Path) -> Path:
    """A local checkpoint directory, or a Hub repo downloaded (or found in the cache) by huggingface_hub."""
    path = Path(name_or_path)
    if path.is_dir():
        return path
    if path.exists():
        raise HFConversionError(f"{path} is a file; pass the checkpoint directory (config.json + weights)")
    from huggingface_hub import snapshot_download

    try:
        # weights in one file, or shards listed in an index (model-00001-of-00002.safetensors …)
        safetensors = ["config.json", "model.safetensors", "model.safetensors.index.json", "model-*-of-*.safetensors"]
        folder = Path(snapshot_download(str(name_or_path), allow_patterns=safetensors))
        if not any(folder.glob("model*.safetensors*")):  # older repos only have pickled weights
            pickled = ["config.json", "pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*-of-*.bin"]
            folder = Path(snapshot_download(str(name_or_path), allow_patterns=pickled))
    except Exception as e:  # offline, unknown repo, gated …
        raise HFConversionError(
            f"{str(name_or_path)!r} is not a local directory and could not be fetched from the Hugging Face Hub "
            f"({type(e).__name__}: {e}). Pass a directory holding config.json and model.safetensors / "
            f"pytorch_model.bin, or go online (HF_HUB_OFFLINE=0)"
        ) from e
    return folder


def _normalize_keys(tensors: Mapping[str, Tensor], adapter: Adapter) -> dict[str, Tensor]:
    """Rename to the task model's key layout: add the base-model prefix when the checkpoint is
    a bare base model (the original ``gpt2`` repo stores ``h.0…``), and TF-era LayerNorm names."""
    out = {re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", k)): v
           for k, v in tensors.items()}
    if not any(k.startswith(adapter.prefix) for k in out):
        out = {k if k.startswith(adapter.outside_prefix) else adapter.prefix + k: v for k, v in out.items()}
    return out


def convert_from_hf(tensors: Mapping[str, Tensor], cfg: ModelConfig, model_type: str) -> dict[str, Tensor]:
    """Hugging Face state dict -> our state dict (strict: every checkpoint tensor accounted for)."""
    adapter = get_adapter(model_type)
    ckpt = Checkpoint(_normalize_keys(tensors, adapter), model_type)
    ours: dict[str, Tensor] = {}
    for rule in adapter.rules(cfg):
        value = rule.load(ckpt)
        if rule.ours is not None:
            ours[rule.ours] = value
    for theirs, mine in adapter.copies(cfg).items():  # tied weights: verify, then drop the copy
        t = ckpt.take_optional(theirs)
        if t is not None and not torch.equal(t, ours[mine]):
            raise HFConversionError(
                f"{model_type} tensor '{theirs}' should be a tied copy of the one we load as '{mine}', but differs: "
                f"the checkpoint has separate weights where our model shares one (if its LM head is untied, "
                f"tie_word_embeddings=false in config.json says so)"
            )
    if cfg.tie_embeddings:
        ours["head.weight"] = ours["tok_embed.weight"]  # Press & Wolf 2017: one matrix in and out
    for pattern, reason in adapter.dropped:
        before = len(ckpt.dropped)
        ckpt.drop(pattern)
        if len(ckpt.dropped) > before:
            log.info("%s: dropped %d tensor(s) matching %s (%s)", model_type, len(ckpt.dropped) - before, pattern, reason)
    ckpt.finish()
    return ours


def from_hf(name_or_path: str | Path, *, dtype: torch.dtype | None = None) -> TransformerModel:
    """Our model with the weights of a transformers checkpoint (local directory or Hub name).

    Returns the model in eval mode, in float32 unless ``dtype`` is given (checkpoint tensors
    are cast on load). Supported model types: ``ADAPTERS``.
    """
    folder = _resolve(name_or_path)
    if not (folder / "config.json").exists():
        raise HFConversionError(f"{folder} has no config.json")
    hf_dict = json.loads((folder / "config.json").read_text())
    cfg = config_from_hf(hf_dict)
    cfg.name = Path(str(name_or_path)).name or cfg.name
    ours = convert_from_hf(_read_tensors(folder), cfg, hf_dict["model_type"])
    model = build_model(cfg)
    try:
        model.load_state_dict(ours, strict=True)  # every parameter of ours filled, nothing extra
    except RuntimeError as e:
        raise HFConversionError(f"converted {hf_dict['model_type']} weights do not fit our model: {e}") from e
    if dtype is not None:
        model.to(dtype)
    return model.eval()


def to_hf(model: TransformerModel, out_dir: str | Path, *, model_type: str | None = None) -> Path:
    """Write ``model`` as a transformers checkpoint (config.json + model.safetensors).

    ``model_type`` (gpt2 | llama | bert | marian) defaults to the one adapter whose
    architecture matches the model's config. The written tensors are checked, keys and
    shapes, against the transformers model class built on the meta device.
    """
    from safetensors.torch import save_file

    cfg = model.config
    candidates = [get_adapter(model_type)] if model_type else [a for a in ADAPTERS.values() if a.family == cfg.family]
    problems = {a.model_type: a.export_problems(cfg) for a in candidates}
    fitting = [a for a in candidates if not problems[a.model_type]]
    if not fitting:
        detail = "; ".join(f"{t}: {', '.join(p)}" for t, p in problems.items()) or f"no adapter for family {cfg.family}"
        raise HFConversionError(f"this model cannot be written as a transformers checkpoint ({detail})")
    adapter = fitting[0]
    hf_cfg = adapter.hf_config(cfg)

    ours = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    for key in ("tok_embed.weight", "head.weight", "head.bias"):  # drop vocab_pad_multiple padding rows
        if key in ours:
            ours[key] = ours[key][: cfg.vocab_size]
    hf: dict[str, Tensor] = {}
    for rule in adapter.rules(cfg):
        hf.update(rule.save(ours[rule.ours] if rule.ours is not None else None))  # type: ignore[arg-type]
    for theirs, mine in adapter.copies(cfg).items():
        hf[theirs] = ours[mine]

    with torch.device("meta"):  # no memory, no initialisation: only names, shapes and ties
        reference = adapter.hf_model_class()(hf_cfg).state_dict(keep_vars=True)
    missing, unexpected = sorted(set(reference) - set(hf)), sorted(set(hf) - set(reference))
    wrong = [k for k in reference if k in hf and tuple(hf[k].shape) != tuple(reference[k].shape)]
    if missing or unexpected or wrong:
        raise HFConversionError(f"{adapter.model_type} export does not match transformers' model: missing {missing}, "
                                f"unexpected {unexpected}, wrong shape {wrong}")
    seen: set[int] = set()
    tensors = {}
    for key, ref in reference.items():  # tied parameters are written once, as save_pretrained does
        if id(ref) not in seen:
            seen.add(id(ref))
            tensors[key] = hf[key].contiguous().clone()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    hf_cfg.save_pretrained(str(out))
    return out


__all__ = ["ADAPTERS", "HFConversionError", "config_from_hf", "convert_from_hf", "from_hf", "to_hf"]
