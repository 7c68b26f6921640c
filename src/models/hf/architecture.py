"""Which of our configs a format holds exactly (``Architecture``), and the activation names both
sides use.

``to_hf`` asks each candidate format's ``Architecture`` for the ways a config differs from
it; a config no format holds is refused with every difference named by its config key.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from src.models.components.differential import ATTENTIONS
from src.models.components.ffn import FFNS
from src.models.components.masks import MASKS
from src.models.components.norms import NORMS
from src.models.components.positions import POSITIONS
from src.models.components.qk_norm import QK_NORMS
from src.models.components.sinks import SINKS
from src.models.config import ModelConfig
from src.models.mixers.base import MIXERS
from src.registry import Registry

#: transformers ``activation_function`` / ``hidden_act`` -> our ffn node (both directions).
ACTIVATIONS: dict[str, dict[str, Any]] = {
    "gelu_new": {"name": "gelu", "approximate": "tanh"},  # GPT-2's tanh approximation
    "gelu_pytorch_tanh": {"name": "gelu", "approximate": "tanh"},
    "gelu": {"name": "gelu", "approximate": "none"},  # exact erf form (BERT)
    "relu": {"name": "relu"},
    "silu": {"name": "silu"},
    "swish": {"name": "silu"},  # Marian's name for SiLU
}


def setting(registry: Registry[Any], node: Mapping[str, Any], key: str) -> Any:
    """A component's setting: the node's value, else its constructor's default."""
    if key in node:
        return node[key]
    p = inspect.signature(registry.get(node["name"]).__init__).parameters.get(key)
    return None if p is None or p.default is inspect.Parameter.empty else p.default


def ffn_to_hf(c: ModelConfig) -> str | None:
    """Our ffn node -> transformers activation name, or None when there is none for it."""
    node: dict[str, Any] = {"name": c.ffn["name"]}
    if c.ffn["name"] == "gelu":
        node["approximate"] = setting(FFNS, c.ffn, "approximate")
    if set(c.ffn) - set(node):  # e.g. a custom key transformers has no field for
        return None
    return next((act for act, ours in ACTIVATIONS.items() if ours == node), None)


class _Any:
    """In an ``Architecture``: the format holds whatever value our config has (``ANY``)."""

    def __repr__(self) -> str:
        return "ANY"


ANY: Any = _Any()

#: Component groups of ModelConfig and their registries (for constructor defaults); a group
#: ModelConfig gains later is added here, so that a format can give a node pattern for it.
GROUPS: dict[str, Registry[Any]] = {
    "position": POSITIONS,
    "norm": NORMS,
    "ffn": FFNS,
    "mask": MASKS,
    "qk_norm": QK_NORMS,
    "sinks": SINKS,
    "attention": ATTENTIONS,
    "mixer": MIXERS,
}

#: ModelConfig keys every format maps in both directions (the round-trip tests check them), plus
#: the label ``name`` and ``vocab_pad_multiple`` (its padding rows are cut on export).
CARRIED = frozenset(
    {
        "vocab_size",
        "d_model",
        "n_layer",
        "n_encoder_layer",
        "n_decoder_layer",
        "n_head",
        "n_kv_head",
        "d_ff",
        "max_seq_len",
        "dropout",
        "tie_embeddings",
        "init_std",
        "pad_token_id",
        "bos_token_id",
        "eos_token_id",
        "decoder_start_token_id",
        "name",
        "vocab_pad_multiple",
    }
)


@dataclass(frozen=True)
class Architecture:
    """The shape of our config a format holds exactly; ``to_hf`` refuses any other, naming each key.

    ``position``, ``norm``, ``ffn`` and ``mask`` are node patterns: the name must match, a key
    given a value must have it (``ANY``: any value, carried over), and every other key the
    config sets must be at its constructor default. ``ffn=None``: any ffn with a transformers
    activation name; ``mask=None``: not checked (the family builds its own). A ModelConfig key
    that is neither carried, nor one of these, nor in ``more`` must be at its default: a key
    added later fails closed until a format says it holds it.
    """

    family: str
    norm_placement: str
    position: Mapping[str, Any]
    norm: Mapping[str, Any]
    ffn: Mapping[str, Any] | None = None
    mask: Mapping[str, Any] | None = None
    bias: Any = True
    embedding_norm: Any = False
    scale_embeddings: Any = False
    gqa: bool = False  # n_kv_head < n_head allowed
    # other keys: the value needed, ANY, or a node pattern
    more: Mapping[str, Any] = field(default_factory=dict)

    def problems(self, c: ModelConfig) -> list[str]:
        """Each way ``c`` differs from this architecture, named by its config key."""
        p = [
            f"model.{k}={getattr(c, k)!r} (needs {want!r})"
            for k, want in (("family", self.family), ("norm_placement", self.norm_placement))
            if getattr(c, k) != want
        ]
        for group, pattern in (
            ("position", self.position),
            ("norm", self.norm),
            ("ffn", self.ffn),
            ("mask", self.mask),
        ):
            node = getattr(c, group)
            if pattern is not None and node is not None:
                p += _node_problems(group, node, pattern)
        if self.ffn is None and ffn_to_hf(c) is None:
            p.append(f"model/ffn={c.ffn} (no transformers activation_function for it)")
        wants = {
            "bias": self.bias,
            "embedding_norm": self.embedding_norm,
            "scale_embeddings": self.scale_embeddings,
            **self.more,
        }
        for k, want in wants.items():
            # a component node added later (in GROUPS), e.g. more={"qk_norm": {...}}
            if isinstance(want, Mapping):
                p += _node_problems(k, getattr(c, k) or {"name": None}, want)
            elif want is not ANY and getattr(c, k) != want:
                p.append(f"model.{k}={getattr(c, k)!r} (needs {want!r})")
        p += (
            []
            if self.gqa or c.kv_heads == c.n_head
            else [f"model.n_kv_head={c.n_kv_head} (needs n_head: no GQA)"]
        )
        known = CARRIED | {f.name for f in dataclasses.fields(self)} | set(self.more)
        for f in dataclasses.fields(c):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            if f.name not in known and getattr(c, f.name) != default:
                p.append(
                    f"model.{f.name}={getattr(c, f.name)!r} (this format has no field for it; "
                    f"needs {default!r})"
                )
        return p


def _node_problems(group: str, node: Mapping[str, Any], pattern: Mapping[str, Any]) -> list[str]:
    if node["name"] != pattern["name"]:
        return [f"model/{group}={node['name']} (needs {pattern['name']})"]
    p = []
    for key in sorted((set(node) | set(pattern)) - {"name"}):
        # unset: the default
        want = pattern.get(key, setting(GROUPS[group], {"name": node["name"]}, key))
        if want is not ANY and setting(GROUPS[group], node, key) != want:
            p.append(f"model.{group}.{key}={setting(GROUPS[group], node, key)!r} (needs {want!r})")
    return p
