"""The questions a study declares before its runs (``protocol.primary``, ``protocol.interactions``).

::

    protocol:
      primary:                                # the primary family: Holm runs over these alone
        - id: swiglu_vs_gelu
          variant: model/ffn=swiglu           # a variant, by its overrides (as --baseline names one)
          reference: model/ffn=gelu
          expect: better                      # optional: the direction the study expects
          # metric: test/loss                 # default: protocol.metric
      interactions:                           # differences of differences
        - id: format_causes_alibi_lead
          variant: model/position=alibi       # (variant - reference) under factor=conditions[0]
          reference: model/position=none      #   against the same under factor=conditions[1]
          factor: data.format
          conditions: [plain, marked]
          family: secondary                   # primary | secondary (default)

A variant spec is ``key=value[,key=value]`` over the factors: those it names must match, the others
are free (an interaction's spec leaves ``factor`` out: the conditions give it). Whether a spec names
a variant the runs have, and a factor's conditions values it takes, is checked against the runs
(``src.reporting.families``); this module checks the shape of the declaration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from src.errors import ConfigError, check_keys

EXPECTATIONS = ("better", "worse", "higher", "lower")
FAMILIES = ("primary", "secondary")


def parse_spec(spec: str, where: str) -> dict[str, str]:
    """``"model/ffn=swiglu,optim=muon"`` -> ``{"model/ffn": "swiglu", "optim": "muon"}``."""
    out: dict[str, str] = {}
    for part in str(spec).split(","):
        key, eq, value = part.strip().partition("=")
        if not eq or not key.strip():
            raise ConfigError(
                f"{where}={spec!r}: a variant is key=value[,key=value] over the study's factors, "
                "e.g. model/ffn=swiglu"
            )
        out[key.strip()] = value.strip()
    return out


def _text(node: Mapping[str, Any], key: str, where: str) -> str:
    value = node.get(key)
    if value in (None, ""):
        raise ConfigError(f"{where}.{key} is missing; give it (see docs/studies.md, 'Families')")
    return str(value)


@dataclass(frozen=True)
class Contrast:
    """One declared question: ``variant`` against ``reference`` on ``metric``."""

    id: str
    variant: str
    reference: str
    metric: str | None = None  # None: protocol.metric
    expect: str | None = None

    @classmethod
    def from_node(cls, node: Any, where: str) -> Contrast:
        if not isinstance(node, Mapping):
            raise ConfigError(
                f"{where} must be a mapping {{id, variant, reference[, metric, expect]}}; got "
                f"{node!r}"
            )
        check_keys(
            node,
            ["id", "variant", "reference", "metric", "expect"],
            where=where,
            prefix=f"{where}.",
        )
        c = cls(
            id=_text(node, "id", where),
            variant=_text(node, "variant", where),
            reference=_text(node, "reference", where),
            metric=None if node.get("metric") in (None, "") else str(node["metric"]),
            expect=None if node.get("expect") in (None, "") else str(node["expect"]),
        )
        parse_spec(c.variant, f"{where}.variant")
        parse_spec(c.reference, f"{where}.reference")
        if c.expect is not None and c.expect not in EXPECTATIONS:
            raise ConfigError(
                f"{where}.expect={c.expect!r} is not known; use one of {', '.join(EXPECTATIONS)}"
                " or leave it out"
            )
        return c


@dataclass(frozen=True)
class Interaction:
    """(variant - reference) under ``factor=conditions[0]`` against the same under
    ``factor=conditions[1]``."""

    id: str
    variant: str
    reference: str
    factor: str
    conditions: tuple[str, str]
    metric: str | None = None
    family: str = "secondary"

    @classmethod
    def from_node(cls, node: Any, where: str) -> Interaction:
        if not isinstance(node, Mapping):
            raise ConfigError(
                f"{where} must be a mapping {{id, variant, reference, factor, conditions"
                f"[, metric, family]}}; got {node!r}"
            )
        check_keys(
            node,
            ["id", "variant", "reference", "factor", "conditions", "metric", "family"],
            where=where,
            prefix=f"{where}.",
        )
        conditions = node.get("conditions")
        if (
            not isinstance(conditions, Sequence)
            or isinstance(conditions, str)
            or len(conditions) != 2
        ):
            raise ConfigError(
                f"{where}.conditions={conditions!r}: give the two values of {where}.factor to "
                "compare, e.g. [plain, marked]"
            )
        family = str(node.get("family") or "secondary")
        if family not in FAMILIES:
            raise ConfigError(
                f"{where}.family={family!r} is not known; use one of {', '.join(FAMILIES)}"
            )
        i = cls(
            id=_text(node, "id", where),
            variant=_text(node, "variant", where),
            reference=_text(node, "reference", where),
            factor=_text(node, "factor", where),
            conditions=(str(conditions[0]), str(conditions[1])),
            metric=None if node.get("metric") in (None, "") else str(node["metric"]),
            family=family,
        )
        for side in ("variant", "reference"):
            if i.factor in parse_spec(getattr(i, side), f"{where}.{side}"):
                raise ConfigError(
                    f"{where}.{side}={getattr(i, side)!r} names {i.factor}, the interaction's "
                    f"factor; leave it out (its values are {where}.conditions)"
                )
        if i.conditions[0] == i.conditions[1]:
            raise ConfigError(f"{where}.conditions names {i.conditions[0]!r} twice")
        return i


def questions_of(
    node: Mapping[str, Any],
) -> tuple[tuple[Contrast, ...], tuple[Interaction, ...]]:
    """``protocol.primary`` and ``protocol.interactions``, checked; ids unique across both."""
    primary, interactions = node.get("primary") or [], node.get("interactions") or []
    for key, value in (("primary", primary), ("interactions", interactions)):
        if not isinstance(value, Sequence) or isinstance(value, str):
            raise ConfigError(f"protocol.{key} must be a list of mappings; got {value!r}")
    contrasts = tuple(
        Contrast.from_node(n, f"protocol.primary[{i}]") for i, n in enumerate(primary)
    )
    inters = tuple(
        Interaction.from_node(n, f"protocol.interactions[{i}]") for i, n in enumerate(interactions)
    )
    ids = [q.id for q in (*contrasts, *inters)]
    twice = sorted({x for x in ids if ids.count(x) > 1})
    if twice:
        raise ConfigError(
            f"protocol.primary / protocol.interactions: the id {', '.join(twice)} is used more "
            "than once; give each question its own id"
        )
    return contrasts, inters
