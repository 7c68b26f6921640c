"""Experiments that compose: a value an experiment sets for the variant it picks is left out when
the command line picks another variant that has no such key.

``experiment=quickstart`` picks ``scheduler=cosine`` and sets ``scheduler.warmup_steps: 30``;
``experiment=quickstart scheduler=none`` then composes a ``none`` schedule holding a
``warmup_steps`` it does not take. The user never typed that key, so refusing it (and advising to
remove an override nobody gave) is wrong; running without it is what was asked. A key typed on
the command line is never left out: a misspelt or misplaced key there is still refused, with the
fix, by the run's validation.

``inherited_keys`` reads the keys an experiment's YAML files set (its own and the experiments in
its defaults list), less the ones the command line typed; ``drop_inherited`` removes, from a plain
run config, those that the chosen variant of their group does not accept.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from src.config.typos import CONF_DIR

log = logging.getLogger(__name__)

#: nodes whose keys are those of the variant their ``name`` picks
MODEL_GROUPS = ("position", "norm", "ffn", "mask", "qk_norm", "sinks", "attention", "init")


def inherited_keys(choices: Mapping[str, Any], typed: Sequence[str]) -> set[str]:
    """Dotted keys set by the chosen experiment(s) (``hydra.runtime.choices``), less those in the
    command line's overrides ``typed`` (as Hydra lists them: ``key=value``, ``+key=``, ``~key``)."""
    keys: set[str] = set()
    for group, name in choices.items():
        if str(group).split("/")[0] == "experiment" and name:
            keys |= _experiment_keys(str(group), str(name), seen=set())
    return keys - {_typed_key(o) for o in typed}


def _typed_key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~").split("@", 1)[0]


def _experiment_keys(group: str, name: str, seen: set[Path]) -> set[str]:
    path = CONF_DIR / group / f"{name}.yaml"
    if path in seen or not path.is_file():
        return set()
    seen.add(path)
    node = yaml.safe_load(path.read_text()) or {}
    keys = {key for key, _ in _leaves(node) if key.split(".")[0] not in ("defaults", "hydra")}
    for entry in node.get("defaults") or []:
        if isinstance(entry, str) and entry != "_self_":  # another experiment of this group
            other = entry.lstrip("/")
            parent, _, base = other.rpartition("/")
            keys |= _experiment_keys(parent or group, base, seen)
    return keys


def _leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, Mapping) and node:
        for k, v in node.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, node


def drop_inherited(plain: dict[str, Any], inherited: set[str]) -> list[str]:
    """Remove from ``plain`` every key in ``inherited`` that its group's chosen variant does not
    accept; return the dotted keys removed (logged once each)."""
    dropped: list[str] = []
    for prefix, node, accepted in _variant_nodes(plain):
        for key in list(node):
            dotted = f"{prefix}.{key}"
            if key != "name" and key not in accepted and dotted in inherited:
                log.info(
                    "%s=%r (set by the experiment, not on the command line): %s=%s takes no such "
                    "key, so the run goes without it",
                    dotted,
                    node.pop(key),
                    prefix.replace(".", "/"),
                    node["name"],
                )
                dropped.append(dotted)
    return dropped


def _variant_nodes(plain: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], set[str]]]:
    """(dotted prefix, node, keys its chosen variant accepts) of each group node with a ``name``."""
    from src.data.sources import DATAMODULE_KEYS, SOURCES
    from src.models.components import (
        ATTENTIONS,
        FFNS,
        INITS,
        MASKS,
        NORMS,
        POSITIONS,
        QK_NORMS,
        SINKS,
    )
    from src.objectives import OBJECTIVES
    from src.optim import OPTIMIZERS, SCHEDULES

    def named(node: Any, registry: Any) -> bool:
        return isinstance(node, dict) and node.get("name") in registry

    for group, registry in (("optim", OPTIMIZERS), ("scheduler", SCHEDULES)):
        node = plain.get(group)
        if named(node, registry):
            yield group, node, set(registry.accepted_keys(node["name"]))
    node = plain.get("data")
    if named(node, SOURCES):
        own = SOURCES.accepted_keys(node["name"])
        kind = SOURCES.get(node["name"]).kind
        yield "data", node, {*own, *DATAMODULE_KEYS.get(kind, ())}
    node = plain.get("objective")
    if named(node, OBJECTIVES):
        yield "objective", node, set(OBJECTIVES.get(node["name"]).options)
    model = plain.get("model") if isinstance(plain.get("model"), dict) else {}
    registries = (POSITIONS, NORMS, FFNS, MASKS, QK_NORMS, SINKS, ATTENTIONS, INITS)
    for group, registry in zip(MODEL_GROUPS, registries, strict=True):
        node = model.get(group)
        if named(node, registry):
            yield f"model.{group}", node, set(registry.accepted_keys(node["name"]))


def hydra_inherited() -> set[str]:
    """``inherited_keys`` of the running Hydra job (empty outside one: everything is refused as
    typed)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return set()
    hc = HydraConfig.get()
    return inherited_keys(hc.runtime.choices, list(hc.overrides.task))
