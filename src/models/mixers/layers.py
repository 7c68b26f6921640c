"""The mixer of each layer: ``model.mixer`` and ``model.layer_mixers`` read, checked and built.

``model.layer_mixers`` is a list of registered mixer names cycled over a causal stack's layers
(Jamba, Lieber et al. 2024: one attention layer in eight; Qwen3-Next: three Gated DeltaNet layers
then one attention layer), like ``model.layer_masks``; an entry named as ``model.mixer`` takes
its parameters, another entry its YAML defaults. Without it every layer uses ``model.mixer``.
Mixers apply to the causal stacks (decoder_only's, an encoder_decoder's decoder); a bidirectional
encoder keeps softmax attention.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from src.errors import ConfigError, did_you_mean
from src.models.components.masks import MASKS
from src.models.components.positions import POSITIONS, Position
from src.models.mixers.base import MIXERS, SequenceMixer
from src.registry import or_list

if TYPE_CHECKING:
    from src.models.config import ModelConfig


def mixer_nodes(config: ModelConfig, n_layer: int | None = None) -> list[dict[str, Any]]:
    """The mixer node of each of ``n_layer`` layers (None: one per distinct entry). Refuses a
    ``layer_mixers`` that is not a non-empty list of registered names."""
    names = config.layer_mixers
    if names is None:
        return [dict(config.mixer)] * (n_layer or 1)
    if isinstance(names, str) or not names or not all(isinstance(n, str) for n in names):
        raise ConfigError(
            f"model.layer_mixers={names!r} must be a non-empty list of mixer names cycled over "
            "the layers, e.g. [linear_attention,attention], or null (every layer uses model.mixer)"
        )
    nodes = []
    for name in names:
        if name not in MIXERS:
            raise ConfigError(
                f"model.layer_mixers has unknown mixer '{name}'{did_you_mean(name, MIXERS.names())}"
                f"; use registered mixers: {or_list(MIXERS.in_order())}"
            )
        own = config.mixer.get("name") == name
        nodes.append(dict(config.mixer) if own else _defaults_node(name))
    return [nodes[i % len(nodes)] for i in range(len(nodes) if n_layer is None else n_layer)]


def _defaults_node(name: str) -> dict[str, Any]:
    """A ``layer_mixers`` entry other than ``model.mixer``: the mixer's own defaults. A mixer's
    ``head_dim`` (Mamba-2's P, Gated DeltaNet's K) is its own, so the attention's head size from
    the builder's context must not fill it (Mamba-2's default is E / n_head, not d_model / n_head)."""
    params = inspect.signature(MIXERS.get(name).__init__).parameters
    return {"name": name, "head_dim": None} if "head_dim" in params else {"name": name}


def is_recurrent(node: dict[str, Any]) -> bool:
    """Whether the node names a mixer other than softmax attention."""
    return not MIXERS.get(node["name"]).attends


def uses_mixers(config: ModelConfig) -> bool:
    """Whether any layer of the config's causal stack is a mixer other than attention."""
    return any(is_recurrent(n) for n in mixer_nodes(config, config.decoder_layers))


def _attention_position(name: str) -> bool:
    """Whether a position scheme acts inside attention (rotates q, k or biases the scores)."""
    cls = POSITIONS.get(name)
    return cls.rotate is not Position.rotate or cls.score_bias is not Position.score_bias


def check_mixers(config: ModelConfig) -> None:
    """Every mixer rule of a model config (``ModelConfig.validate`` runs it once): each node's
    keys and ``check_args``; then, where a layer is not attention, the position scheme (an
    all-mixer stack has no attention for RoPE, ALiBi or T5's bias to act in), its mask (mixers
    are causal) and sink tokens (their pass runs through attention only)."""
    context = config.component_context()
    MIXERS.check(config.mixer, **context)
    nodes = mixer_nodes(config, config.decoder_layers)
    for node in {n["name"]: n for n in mixer_nodes(config)}.values():
        MIXERS.check(node, **context)
    if not any(is_recurrent(n) for n in nodes):
        return
    position = config.position.get("name")
    if all(is_recurrent(n) for n in nodes) and _attention_position(position):
        raise ConfigError(
            f"model/position={position} acts inside attention, and no layer of this stack is "
            "attention (model.mixer / model.layer_mixers); use model/position=none (a recurrent "
            "mixer orders tokens itself), learned or sinusoidal, or add attention to "
            "model.layer_mixers"
        )
    masks = config.layer_masks or ([config.mask["name"]] if config.mask else [])
    for i, node in enumerate(nodes):
        mask = masks[i % len(masks)] if masks else None
        if is_recurrent(node) and mask is not None and not MASKS.get(mask).causal:
            raise ConfigError(
                f"model.mixer '{node['name']}' is causal but layer {i} has model/mask={mask}, "
                "which lets a token see later ones; use model/mask=causal with a mixer"
            )
    if config.sinks.get("name") == "token":
        raise ConfigError(
            "model/sinks=token runs the sink tokens through every layer, which a recurrent "
            "mixer cannot (it has no keys to prepend them to); use model/sinks=none or learned"
        )


def build_mixers(config: ModelConfig, n_layer: int) -> list[SequenceMixer | None]:
    """Per layer the mixer module, or None where the layer is softmax attention (the block
    builds it)."""
    context = config.component_context()
    return [
        MIXERS.build(node, **context) if is_recurrent(node) else None
        for node in mixer_nodes(config, n_layer)
    ]
