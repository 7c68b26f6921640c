"""The comparison protocol a study declares (``protocol:`` in its config; docs/studies.md).

::

    protocol:
      factors: [model/ffn, model/norm]        # the override keys compared (the variants)
      tune:                                   # tuned per variant: key -> candidates
        optim.lr: [1.0e-3, 2.0e-3, 4.0e-3]    #   (at least optim.lr, 3-5 log-spaced values)
      design: two_stage                       # two_stage: every candidate on tune_seeds, then the
      tune_seeds: [0]                         #   chosen value on seeds | grid: every seed at every candidate
      seeds: [1, 2, 3, 4, 5]
      match: params                           # params | flops | tokens (src/training/budget.py)
      select: val/loss                        # selection metric (validation split only)
      metric: test/loss                       # verdict metric (test split only)
      secondary: []                           # more verdict metrics (names or fnmatch patterns)
      baseline: model/ffn=gelu,model/norm=layernorm
      comparisons: baseline                   # baseline: each variant vs the baseline |
                                              #   one_factor: also every pair differing in one
                                              #   factor | factor:<key>: only the pairs differing in
                                              #   <key> alone
      primary: []                             # the declared questions (src/studies/questions.py)
      interactions: []                        #   and differences of differences
      test: auto                              # auto | t | permutation (docs/studies.md)
      max_grid_extensions: 2                  # grid steps added past a chosen edge before confirm
      allow_edge: false                       # true: confirm even with a chosen value at an edge
      stage: null                             # set per job by python -m src.study (tune|confirm|grid)
    report:
      equivalence_margin: 0.02                # TOST margin in the metric's units (or {metric: margin})

The runs save it in ``.hydra/config.yaml``; ``python -m src.report`` reads it from there (the
command-line flags win), and ``python -m src.study`` runs its stages.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from src.errors import ConfigError, check_keys
from src.studies.questions import Contrast, Interaction, questions_of

DESIGNS = ("two_stage", "grid")
STAGES = ("tune", "confirm", "grid")
MATCH_MODES = ("params", "flops", "tokens")
COMPARISONS = ("baseline", "one_factor")
TESTS = ("auto", "t", "permutation")
#: ``comparisons: factor:<key>`` -- only the pairs of variants that differ in ``<key>`` and in
#: nothing else (an ablation: the same variant under the other value of one factor)
FACTOR_PREFIX = "factor:"


def compared_factor(comparisons: str) -> str | None:
    """The one factor a ``factor:<key>`` comparisons setting compares along; None for the other
    settings."""
    return comparisons[len(FACTOR_PREFIX) :] if comparisons.startswith(FACTOR_PREFIX) else None


def canonical(value: Any) -> str:
    """One spelling per value: ``1e-3``, ``0.001``, ``1.0e-03`` -> ``0.001``; ``2.0`` -> ``2``; text
    unchanged."""
    text = str(value)
    try:
        x = float(text)
    except ValueError:
        return text
    if not math.isfinite(x):
        return text
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)


def as_number(value: str) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


@dataclass
class Protocol:
    """A study's protocol (module docstring); ``declared`` is False for one built from flags
    only."""

    factors: list[str] = field(default_factory=list)
    # key -> canonical candidates ([] = those run)
    tune: dict[str, list[str]] = field(default_factory=dict)
    design: str = "grid"
    tune_seeds: list[str] = field(default_factory=list)
    seeds: list[str] = field(default_factory=list)
    match: str = "params"
    select: str = "val/loss"
    metric: str = "test/loss"
    secondary: list[str] = field(default_factory=list)
    baseline: str | None = None
    comparisons: str = "baseline"
    equivalence_margin: float | dict[str, float] | None = None
    auto_seeds: bool = (
        False  # seeds: auto -- the confirm stage runs the seeds --plan finds, up to max_seeds
    )
    max_seeds: int | None = None
    target_mde: float | None = (
        None  # the smallest difference of `metric` the study must detect (--plan)
    )
    pilot_sd: float | None = (
        None  # a standard deviation of `metric` over seeds, when the tune runs give none
    )
    primary: tuple[Contrast, ...] = ()  # the declared questions: Holm runs over these alone
    interactions: tuple[Interaction, ...] = ()
    test: str = "auto"  # auto | t | permutation (src/reporting/comparisons.py)
    max_grid_extensions: int = 2  # steps src.study adds past a chosen value at a grid edge
    allow_edge: bool = False  # confirm with a chosen value still at an edge (verdicts "edge")
    # the questions came from this file after the runs (src.report --questions), not from the runs
    questions_from: str | None = None
    declared: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Protocol | None:
        """From a run config's ``protocol`` and ``report`` nodes; None when it declares none."""
        node = config.get("protocol")
        if not node:
            return None
        report = config.get("report") or {}
        return cls.from_node(
            node, report.get("equivalence_margin") if isinstance(report, Mapping) else None
        )

    @classmethod
    def from_node(cls, node: Mapping[str, Any], margin: Any = None) -> Protocol:
        known = {f.name for f in fields(cls)} - {
            "declared",
            "equivalence_margin",
            "questions_from",
        } | {"stage"}
        check_keys(node, sorted(known), where="protocol", prefix="protocol.")
        tune = node.get("tune") or {}
        if not isinstance(tune, Mapping):
            raise ConfigError(
                f"protocol.tune must map keys to candidate lists, e.g. {{optim.lr: [1e-3, 2e-3, "
                f"4e-3]}}; got {tune!r}"
            )
        primary, interactions = questions_of(node)
        extensions = node.get("max_grid_extensions", 2)
        if isinstance(extensions, bool) or not isinstance(extensions, int) or extensions < 0:
            raise ConfigError(
                f"protocol.max_grid_extensions={extensions!r} is invalid: a whole number of grid "
                "steps, 0 or more (0: never extend)"
            )
        allow_edge = node.get("allow_edge", False)
        if not isinstance(allow_edge, bool):
            raise ConfigError(f"protocol.allow_edge={allow_edge!r} must be true or false")
        p = cls(
            factors=[str(k) for k in node.get("factors") or []],
            tune={
                str(k): [
                    canonical(v)
                    for v in (vs if isinstance(vs, Sequence) and not isinstance(vs, str) else [vs])
                ]
                for k, vs in tune.items()
            },
            design=str(node.get("design") or "grid"),
            tune_seeds=[canonical(s) for s in node.get("tune_seeds") or []],
            seeds=[]
            if node.get("seeds") == "auto"
            else [canonical(s) for s in node.get("seeds") or []],
            auto_seeds=node.get("seeds") == "auto",
            max_seeds=_count(node, "max_seeds"),
            match=str(node.get("match") or "params"),
            select=str(node.get("select") or "val/loss"),
            metric=str(node.get("metric") or "test/loss"),
            secondary=[str(s) for s in node.get("secondary") or []],
            baseline=None if node.get("baseline") in (None, "") else str(node["baseline"]),
            comparisons=str(node.get("comparisons") or "baseline"),
            equivalence_margin=_margin(margin),
            target_mde=_positive(node, "target_mde"),
            pilot_sd=_positive(node, "pilot_sd"),
            primary=primary,
            interactions=interactions,
            test=str(node.get("test") or "auto"),
            max_grid_extensions=extensions,
            allow_edge=allow_edge,
            declared=True,
        )
        p.check()
        return p

    def check(self) -> None:
        for key, value, allowed in (
            ("design", self.design, DESIGNS),
            ("match", self.match, MATCH_MODES),
            ("comparisons", self.comparisons, COMPARISONS),
            ("test", self.test, TESTS),
        ):
            if key == "comparisons" and compared_factor(value):
                continue
            if value not in allowed:
                extra = f", {FACTOR_PREFIX}<key>" if key == "comparisons" else ""
                raise ConfigError(
                    f"protocol.{key}={value!r} is not known; use one of {', '.join(allowed)}{extra}"
                )
        if self.design == "two_stage" and self.declared and not self.tune_seeds:
            raise ConfigError(
                "protocol.design=two_stage needs protocol.tune_seeds (the seeds every candidate "
                "runs on), e.g. [0]"
            )
        if self.auto_seeds and self.declared:
            if self.design != "two_stage":
                raise ConfigError(
                    "protocol.seeds=auto needs protocol.design=two_stage: the confirm seeds are "
                    "planned from the tune stage's spread, and the grid design runs every seed at "
                    "the tune stage"
                )
            if self.target_mde is None or self.max_seeds is None:
                raise ConfigError(
                    "protocol.seeds=auto needs protocol.target_mde (the difference to detect) and "
                    "protocol.max_seeds (the most seeds per variant to spend), e.g. "
                    "target_mde=0.02 max_seeds=10"
                )
        if self.select.startswith("test/"):
            raise ConfigError(
                f"protocol.select={self.select!r}: selection must use the validation split "
                "(val/...)"
            )
        for key in [self.metric, *self.secondary] if self.declared else []:
            if key.startswith("val/"):
                raise ConfigError(
                    f"protocol verdict metric {key!r}: verdicts use the test split (test/...)"
                )
        for key, cands in self.tune.items():
            if self.declared and not cands:
                raise ConfigError(f"protocol.tune.{key} has no candidates")

    def stage_of(self, config: Mapping[str, Any]) -> str:
        """A run's stage: its ``protocol.stage``; under the grid design (or no protocol)
        ``grid``."""
        node = config.get("protocol") or {}
        stage = node.get("stage") if isinstance(node, Mapping) else None
        if stage in (None, ""):
            return "grid" if self.design == "grid" else "unlabelled"
        return str(stage)

    def describe(self, secondary: Sequence[str] | None = None, matched: str | None = None) -> str:
        """One paragraph for the report (``secondary``: the secondary metrics found, default the
        patterns; ``matched``: how the runs were actually matched, from their budget.json, when it
        differs)."""
        secondary = self.secondary if secondary is None else secondary
        tune = "; ".join(f"`{k}` ∈ {{{', '.join(v)}}}" for k, v in self.tune.items()) or "nothing"
        if not self.tune:
            design = "fixed values — nothing is selected, every run is a verdict run"
        elif self.design == "two_stage":
            design = (
                "two stages — *tune*: every candidate on seed(s) "
                f"{', '.join(self.tune_seeds) or '?'}, the value with the lowest mean "
                f"`{self.select}` chosen per variant; *confirm*: the chosen value on seeds "
                + (
                    f"as many seeds as --plan finds for a difference of {self.target_mde:g} (at "
                    f"most {self.max_seeds})"
                    if self.auto_seeds
                    else f"{', '.join(self.seeds) or '?'}"
                )
            )
        else:
            design = (
                "grid — every candidate on every seed "
                f"({', '.join(self.seeds) or 'the seeds run'}), the value with the lowest mean "
                f"`{self.select}` over seeds chosen per variant"
            )
        return (
            f"Tuned per variant: {tune}. Design: {design}. Selection on the validation split "
            f"(`{self.select}`), verdicts on the test split (`{self.metric}`"
            + (f"; secondary: {', '.join(f'`{s}`' for s in secondary)}" if secondary else "")
            + "). Matching: "
            + (
                f"{self.match}."
                if matched in (None, self.match)
                else f"{matched} (the runs' budget.json; protocol.match={self.match} applies to runs that "
                "python -m src.study plans)."
            )
        )


def _count(node: Mapping[str, Any], key: str) -> int | None:
    """``protocol.<key>`` as a whole number >= 2, or None when unset."""
    value = node.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise ConfigError(
            f"protocol.{key}={value!r} is invalid: a whole number of seeds, 2 or more, or null"
        )
    return value


def _positive(node: Mapping[str, Any], key: str) -> float | None:
    """``protocol.<key>`` as a positive number, or None when unset."""
    value = node.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(
            f"protocol.{key}={value!r} is invalid: a positive number in the verdict metric's "
            "units, or null"
        )
    return float(value)


def _margin(value: Any) -> float | dict[str, float] | None:
    if value in (None, ""):
        return None
    if isinstance(value, Mapping):
        return {str(k): float(v) for k, v in value.items() if v is not None}
    try:
        margin = float(value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"report.equivalence_margin={value!r} must be a number in the metric's units (e.g. "
            f"0.02) or a mapping {{metric: margin}}"
        ) from None
    if margin <= 0:
        raise ConfigError(f"report.equivalence_margin={value!r} must be positive")
    return margin


#: protocol fields that may grow between stages (more seeds, more candidates): the runs' lists are
#: joined
GROWING = ("factors", "tune_seeds", "seeds", "secondary")
#: the command-line flag that sets each field (named when runs disagree on it)
FLAGS = {
    "design": "--design",
    "select": "--select",
    "metric": "--metric",
    "baseline": "--baseline",
    "comparisons": "--comparisons",
    "equivalence_margin": "--equivalence-margin",
    "secondary": "--extra",
    "test": "--test",
    "primary": "--questions",
    "interactions": "--questions",
}


def merge_protocols(found: Sequence[Protocol], given: Sequence[str] = ()) -> Protocol | None:
    """The one protocol of a set of runs; None when no run declares one. Seeds, factors, secondary
    metrics and tuned candidates may have grown between stages (they are joined); the tuned keys and
    every other field must agree, unless ``given`` names it (a flag sets it)."""
    if not found:
        return None
    merged: dict[str, Any] = {}
    disagree: list[str] = []
    for f in fields(Protocol):
        values = [getattr(p, f.name) for p in found]
        if f.name == "tune":
            keys = list(dict.fromkeys(k for v in values for k in v))
            if any(list(v) != keys for v in values) and f.name not in given:
                disagree.append(f"tuned keys {sorted({tuple(v) for v in values})}")
            merged["tune"] = {
                k: list(dict.fromkeys(c for v in values for c in v.get(k, []))) for k in keys
            }
        elif f.name in GROWING:
            merged[f.name] = list(dict.fromkeys(x for v in values for x in v))
        else:
            merged[f.name] = values[0]
            distinct = [v for i, v in enumerate(values) if v not in values[:i]]
            if len(distinct) > 1 and f.name not in given:
                disagree.append(
                    f"{f.name} {distinct}"
                    + (f" (choose with {FLAGS[f.name]})" if f.name in FLAGS else "")
                )
    if disagree:
        raise ConfigError(
            f"the runs declare different protocols: {'; '.join(disagree)}; report each study's "
            "sweep directory separately, or give the flag"
        )
    return Protocol(**merged)
