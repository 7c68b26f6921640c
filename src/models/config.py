"""The plain model config: names and numbers, the same keys for every family.

A checkpoint stores this dict; ``build_model`` turns it back into modules, so checkpoints
reload after code moves. Unknown keys fail loudly, with the accepted ones listed.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from src.errors import ConfigError, check_keys, did_you_mean
from src.registry import or_list

__all__ = ["ModelConfig"]


@dataclass
class ModelConfig:
    family: str = "decoder_only"
    vocab_size: int = 50257
    d_model: int = 768
    n_layer: int = 12
    n_encoder_layer: int | None = None  # encoder_decoder only (defaults to n_layer)
    n_decoder_layer: int | None = None
    n_head: int = 12
    n_kv_head: int | None = None  # None = n_head (MHA); 1 = MQA; otherwise GQA
    d_head: int | None = (
        None  # channels per head; None = d_model / n_head (T5's d_kv and Qwen 3's head_dim differ)
    )
    attn_scale: float | None = (
        None  # scores = scale · q·k; None = 1/√d_head (Vaswani et al. §3.2.1); T5 uses 1.0
    )
    d_ff: int = 3072
    max_seq_len: int = 1024
    dropout: float = 0.0
    bias: bool = True
    tie_embeddings: bool = True
    norm_placement: str = "pre"
    embedding_norm: bool = False  # BERT normalises the summed embeddings
    scale_embeddings: bool = False  # Vaswani et al. §3.4: multiply embeddings by √d_model
    scale_head: bool = (
        False  # T5 v1.0 (Mesh TF): multiply the final hidden states by d_model^-0.5 before the head
    )
    vocab_pad_multiple: int = 1  # pad embedding/head rows to a multiple (64 speeds up matmuls)
    init_std: float = 0.02
    pad_token_id: int | None = None
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    decoder_start_token_id: int | None = None
    position: dict[str, Any] = field(default_factory=lambda: {"name": "learned"})
    norm: dict[str, Any] = field(default_factory=lambda: {"name": "layernorm", "eps": 1e-5})
    ffn: dict[str, Any] = field(default_factory=lambda: {"name": "gelu"})
    mask: dict[str, Any] | None = None  # None = the family's default
    # registered mask names cycled over the layers (Gemma 2: [sliding_window, causal]); None =
    # every layer uses model.mask. An entry named as model.mask takes its keys (the window)
    layer_masks: list[str] | None = None
    # cap · tanh(x / cap) on the attention scores / the output logits (Gemma 2, §2); None = none
    attn_softcap: float | None = None
    final_softcap: float | None = None
    # the self-attention kernel: sdpa (SDPA, the explicit path where it must) or flex
    # (FlexAttention with a BlockMask per batch, components/flex.py)
    attn_kernel: str = "sdpa"
    # a norm on queries and keys (model/qk_norm)
    qk_norm: dict[str, Any] = field(default_factory=lambda: {"name": "none"})
    # attention sinks (model/sinks): a learned logit per head in the softmax (gpt-oss)
    sinks: dict[str, Any] = field(default_factory=lambda: {"name": "none"})
    # the self-attention (model/attention): standard or differential (Ye et al. 2024)
    attention: dict[str, Any] = field(default_factory=lambda: {"name": "standard"})
    # the token mixer of every layer (model/mixer): attention, or a recurrent replacement
    mixer: dict[str, Any] = field(default_factory=lambda: {"name": "attention"})
    # registered mixer names cycled over the causal stack's layers ([linear_attention,
    # attention]); None = model.mixer in every layer. An entry named as model.mixer takes its keys
    layer_mixers: list[str] | None = None
    # the weight initialisation (model/init)
    init: dict[str, Any] = field(default_factory=lambda: {"name": "gpt2"})
    # how init, learning rates, attention scale and output change with width (model/parametrization)
    parametrization: dict[str, Any] = field(default_factory=lambda: {"name": "sp"})
    name: str = "custom"  # a label for tables; never consulted when building

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ModelConfig:
        """The validated config of a plain dict (``validate``: the one place a model config is
        checked)."""
        d = dict(d)
        known = sorted(f.name for f in dataclasses.fields(cls))
        own = {k: v for k, v in d.items() if not str(k).startswith("_")}
        check_keys(own, known, where="model", prefix="model.")
        d = {k: v for k, v in d.items() if k in known}
        for group in (
            "position",
            "norm",
            "ffn",
            "mask",
            "qk_norm",
            "sinks",
            "attention",
            "init",
            "mixer",
            "parametrization",
        ):
            if d.get(group) is not None:
                if isinstance(d[group], str):
                    d[group] = {"name": d[group]}
                d[group] = dict(d[group])
        from src.models.families import FAMILIES

        if d.get("family", cls.family) in FAMILIES:  # an unknown family: validate() says so
            d = FAMILIES.get(d.get("family", cls.family)).derive(d)
        cfg = cls(**d)
        cfg.validate()
        return cfg

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def kv_heads(self) -> int:
        return self.n_kv_head or self.n_head

    @property
    def head_dim(self) -> int:
        """Channels per head: ``d_head``, else d_model / n_head."""
        return self.d_head if self.d_head is not None else self.d_model // self.n_head

    @property
    def padded_vocab_size(self) -> int:
        m = max(1, self.vocab_pad_multiple)
        return (self.vocab_size + m - 1) // m * m

    @property
    def encoder_layers(self) -> int:
        return self.n_encoder_layer if self.n_encoder_layer is not None else self.n_layer

    @property
    def decoder_layers(self) -> int:
        return self.n_decoder_layer if self.n_decoder_layer is not None else self.n_layer

    def validate(self) -> None:
        """Every rule a model config must meet, without building anything: the numbers, each
        component's own checks (``Registry.check``: name, keys, ``check_args``), then the family
        (its name, ``check_config``, the placement per stack). ``from_dict`` runs this once; the
        builder, ``Registry.build`` and the constructors trust a ``ModelConfig`` they are given."""
        from src.models.components import (
            ATTENTIONS,
            FFNS,
            INITS,
            MASKS,
            NORMS,
            PLACEMENTS,
            POSITIONS,
            QK_NORMS,
            SINKS,
        )
        from src.models.components.attention import MultiHeadAttention
        from src.models.components.flex import check_kernel
        from src.models.components.parametrization import PARAMETRIZATIONS
        from src.models.families import FAMILIES

        def need(cond: bool, msg: str) -> None:
            if not cond:
                raise ConfigError(msg)

        for key in ("vocab_size", "d_model", "n_layer", "n_head", "d_ff", "max_seq_len"):
            v = getattr(self, key)
            need(isinstance(v, int) and v > 0, f"model.{key}={v!r} must be a positive integer")
        MultiHeadAttention.check_args(
            d_model=self.d_model,
            n_head=self.n_head,
            n_kv_head=self.n_kv_head,
            head_dim=self.d_head,
            scale=self.attn_scale,
        )
        need(0.0 <= self.dropout < 1.0, f"model.dropout={self.dropout} must be in [0, 1)")
        need(
            self.norm_placement in PLACEMENTS,
            f"model.norm_placement='{self.norm_placement}' is not known; "
            f"use {or_list(PLACEMENTS.in_order(), quote=True)}",
        )
        context = self.component_context()
        name = self.position.get("name")
        if (
            "scaling" in self.position
            and name in POSITIONS
            and "scaling" not in POSITIONS.accepted_keys(name)
        ):
            raise ConfigError(
                "model.position.scaling is RoPE frequency scaling (linear, dynamic, yarn, "
                f"llama3); model/position={name} has no rotary frequencies to scale. Use "
                "model/position=rope, or remove model.position.scaling"
            )
        POSITIONS.check(self.position, **context)
        NORMS.check(self.norm, **context)
        FFNS.check(self.ffn, **context)
        if self.mask is not None:
            MASKS.check(self.mask, max_seq_len=self.max_seq_len)
        for key in ("attn_softcap", "final_softcap"):
            cap = getattr(self, key)
            need(
                cap is None
                or (not isinstance(cap, bool) and isinstance(cap, (int, float)) and 0 < cap < 1e38),
                f"model.{key}={cap!r} must be a positive number (cap · tanh(x / cap); Gemma 2 uses "
                "50 on the scores, 30 on the logits), or null for no cap",
            )
        check_kernel(self.attn_kernel, self.dropout)
        QK_NORMS.check(self.qk_norm, **context)
        SINKS.check(self.sinks, **context)
        ATTENTIONS.check(self.attention, **context, n_kv_head=self.kv_heads)
        INITS.check(self.init, std=self.init_std)
        PARAMETRIZATIONS.check(self.parametrization, d_model=self.d_model, config=self)
        need(
            self.family in FAMILIES,
            f"model.family='{self.family}' is not known; use {or_list(FAMILIES.in_order())}",
        )
        family = FAMILIES.get(self.family)
        family.check_config(self)  # first: a family that fixes its masks refuses layer_masks
        from src.models.mixers.layers import check_mixers

        check_mixers(self)
        if self.layer_masks is not None:
            for node in self.layer_mask_nodes():
                MASKS.check(node, max_seq_len=self.max_seq_len)
        family.check_placement(self)

    def layer_mask_nodes(self, n_layer: int | None = None) -> list[dict[str, Any]]:
        """The mask node of each of ``n_layer`` layers (None: one per entry): ``layer_masks``
        cycled (an entry named as ``model.mask`` takes its keys), or ``model.mask`` everywhere.
        Refuses a ``layer_masks`` that is not a non-empty list of registered names, or an entry
        missing a key it needs."""
        from src.models.components import MASKS

        names = self.layer_masks
        if names is None:
            return [dict(self.mask)] * (n_layer or 1) if self.mask is not None else []
        if isinstance(names, str) or not names or not all(isinstance(n, str) for n in names):
            raise ConfigError(
                f"model.layer_masks={names!r} must be a non-empty list of mask names cycled over "
                "the layers, e.g. [sliding_window,causal], or null (every layer uses model.mask)"
            )
        own = self.mask or {}
        nodes = []
        for name in names:
            if name not in MASKS:
                hint = did_you_mean(name, MASKS.names())
                raise ConfigError(
                    f"model.layer_masks has unknown mask '{name}'{hint}; use registered masks: "
                    f"{or_list(MASKS.in_order())}"
                )
            node = dict(own) if own.get("name") == name else {"name": name}
            missing = [
                p.name
                for p in inspect.signature(MASKS.get(name).__init__).parameters.values()
                if p.name != "self"
                and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                and p.default is p.empty
                and p.name not in node
            ]
            if missing:
                raise ConfigError(
                    f"model.layer_masks entry '{name}' takes model.mask.{missing[0]} from "
                    f"model.mask; set model/mask={name} model.mask.{missing[0]}=<value>"
                )
            nodes.append(node)
        return [nodes[i % len(nodes)] for i in range(len(nodes) if n_layer is None else n_layer)]

    def component_context(self) -> dict[str, Any]:
        """What the builder hands every component constructor that asks for it (by name)."""
        return {
            "d_model": self.d_model,
            "n_head": self.n_head,
            "head_dim": self.head_dim,
            "max_seq_len": self.max_seq_len,
            "d_ff": self.d_ff,
            "bias": self.bias,
            "dropout": self.dropout,
        }
