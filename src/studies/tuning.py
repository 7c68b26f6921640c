"""Per-variant tuning: each variant at its own best value of the tuned hyper-parameters.

A variant is every override but the seed, the tuned keys and ``protocol.*``; within a variant,
a *candidate* is one combination of tuned values (``optim.lr=0.002``). Each run's tuned values
are read from its saved config (so ``1e-3`` and ``0.001`` are one candidate, and a run that
left a key at its default still has a value).

Selection (validation only): a candidate's score is the mean of the selection metric
(``val/loss``) over its selection runs (``tune`` stage, or every run under the ``grid``
design). A candidate with a non-finite value in any seed (diverged) scores +inf; runs that
failed, are incomplete or never validated leave it out of the mean, and a candidate with none
left is not scored (both said in the notes). The chosen candidate is the lowest score (ties:
the first in ascending order). ``edge`` lists the keys whose chosen value is the smallest or
largest candidate: the optimum may lie outside the grid.

Grid extension: ``python -m src.study`` adds one candidate past such an edge (``extended_value``),
runs it on the variant's selection seeds and selects again, up to ``protocol.max_grid_extensions``
times per key. The added candidates are known from the runs alone: a run whose tuned value is not
among its protocol's declared candidates (``TunedVariant.extensions``).

Verdict runs: the runs at the chosen candidate in the ``confirm`` stage (``two_stage``), or
every run at it (``grid``). With nothing tuned every run is a verdict run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from src.studies.outcomes import run_outcome
from src.studies.protocol import Protocol, as_number, canonical
from src.studies.runs import RunRecord, Variant, config_value, group_runs


@dataclass
class Candidate:
    values: dict[str, str]  # tuned key -> canonical value
    runs: list[RunRecord]  # the selection runs at these values
    # mean selection metric over seeds; inf: a seed diverged; None: nothing to score
    score: float | None
    seeds: list[Any] = field(default_factory=list)  # seeds that entered the score
    note: str = ""

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.values.items()) or "(untuned)"


@dataclass
class GridExtension:
    """The candidates added to one tuned key's declared grid for one variant."""

    key: str
    added: list[str]  # canonical values, outwards from the declared grid
    closed: bool  # the chosen value is no longer at an edge of the extended grid


@dataclass
class TunedVariant:
    variant: Variant
    candidates: list[Candidate]
    chosen: dict[str, str] | None  # None: no candidate could be scored
    edge: list[str]  # tuned keys whose chosen value sits at the edge of the grid
    verdict_runs: list[RunRecord]
    notes: list[str] = field(default_factory=list)
    extensions: list[GridExtension] = field(default_factory=list)

    @property
    def edge_verdicts(self) -> bool:
        """Its verdicts were made at a chosen value still at an edge (flagged "edge")."""
        return bool(self.edge and self.verdict_runs)

    def grid(self, key: str, protocol: Protocol) -> list[str]:
        """The candidates of ``key`` for this variant: the declared ones and any it ran, sorted."""
        return key_grid(protocol, self.candidates, key)

    def next_extension(self, protocol: Protocol) -> tuple[str, str] | None:
        """(key, value): the candidate one grid step past the first edge key that has extensions
        left (``protocol.max_grid_extensions`` per key) and can be extended; None otherwise."""
        for k in self.edge if self.chosen is not None else []:
            if len(self.added(k)) < protocol.max_grid_extensions:
                value = extended_value(self.grid(k, protocol), self.chosen[k])
                if value is not None:
                    return k, value
        return None

    def added(self, key: str) -> list[str]:
        """The candidates of ``key`` added past its declared grid (oldest first)."""
        return next((e.added for e in self.extensions if e.key == key), [])

    def role(self, run: RunRecord, protocol: Protocol) -> str:
        """selection | verdict | selection+verdict | "" (what the report used this run for)."""
        roles = []
        if any(run is x for c in self.candidates for x in c.runs):
            roles.append("selection")
        if any(run is x for x in self.verdict_runs):
            roles.append("verdict")
        return "+".join(roles)


def tuned_values(run: RunRecord, keys: Sequence[str]) -> dict[str, str]:
    """The run's values of the tuned keys (override, else config), canonical."""
    out = {}
    for k in keys:
        v = run.overrides.get(k)
        if v is None:
            v = config_value(run.config, k)
        out[k] = canonical(v) if v is not None else "?"
    return out


def _order(value: str) -> tuple[int, float, str]:
    x = as_number(value)
    return (0, x, "") if x is not None else (1, 0.0, value)


def key_grid(protocol: Protocol, cands: Sequence[Candidate], key: str) -> list[str]:
    return sorted(
        {canonical(x) for x in protocol.tune.get(key) or []} | {c.values[key] for c in cands},
        key=_order,
    )


def _geometric(values: Sequence[Decimal]) -> bool:
    """The grid steps by a ratio rather than a difference: its neighbouring ratios vary less (as
    max / min) than its differences do. A grid of two (positive) values counts as geometric."""
    if not all(v > 0 for v in values) and not all(v < 0 for v in values):
        return False
    ratios = [b / a for a, b in zip(values, values[1:])]
    diffs = [b - a for a, b in zip(values, values[1:])]
    return max(ratios) / min(ratios) <= max(diffs) / min(diffs)


def extended_value(grid: Sequence[str], chosen: str) -> str | None:
    """The candidate one step past ``chosen``, the smallest or largest value of ``grid`` (sorted,
    canonical), or None where the grid cannot be extended (fewer than 2 numbers, text, a step
    across zero, a whole-number step that rounds to nothing).

    The step is the grid's own at that edge: a geometric grid (its neighbouring *ratios* are the
    more constant, ``_geometric``) multiplies by the ratio of the edge value to its neighbour
    ([1e-3, 2e-3, 4e-3]: 1e-3 -> 5e-4, 4e-3 -> 8e-3; [1e-3, 3e-3, 1e-2]: 1e-3 -> 3.3e-4), rounded
    to the fewest significant digits (2 or more) within 5% of the step; an arithmetic grid (its
    *differences* the more constant) adds the difference to the neighbour ([0, 0.1, 0.2]: 0.2 ->
    0.3), exactly, in decimal. A grid of whole numbers stays whole."""
    if len(grid) < 2 or chosen not in (grid[0], grid[-1]):
        return None
    if any(as_number(x) is None or not math.isfinite(as_number(x) or 0.0) for x in grid):
        return None
    values = [Decimal(x) for x in grid]
    edge, near = (values[0], values[1]) if chosen == grid[0] else (values[-1], values[-2])
    geometric = _geometric(values)
    if geometric:
        new = edge * edge / near
        for digits in range(2, 28):
            rounded = Decimal(f"{new:.{digits}g}")
            if abs(rounded - new) <= abs(new - edge) / 20:
                break
        new = rounded
    else:
        new = 2 * edge - near
        if (new < 0 <= min(values)) or (new > 0 >= max(values)):
            return None  # a non-negative grid (warmup steps, weight decay) stays non-negative
    if all("." not in x and "e" not in x for x in grid):  # whole numbers (canonical text)
        new = new.to_integral_value()
    # a whole-number ratio step that rounds back onto the edge, or to zero, adds nothing
    if new == edge or (geometric and new == 0):
        return None
    return canonical(new)


def extensions_of(
    protocol: Protocol, cands: Sequence[Candidate], keys: Sequence[str], edge: Sequence[str]
) -> list[GridExtension]:
    """Per tuned key with declared candidates, the values run beyond them (outwards)."""
    out = []
    for k in keys:
        declared = {canonical(x) for x in protocol.tune.get(k) or []}
        numbers = [as_number(x) for x in declared]
        if not declared or any(x is None for x in numbers):
            continue
        low = min(x for x in numbers if x is not None)
        added = {c.values[k] for c in cands} - declared
        below = sorted((x for x in added if (as_number(x) or 0.0) < low), key=_order, reverse=True)
        above = sorted((x for x in added if x not in below), key=_order)
        if added:
            out.append(GridExtension(k, below + above, k not in edge))
    return out


def score_candidate(values: dict[str, str], runs: list[RunRecord], metric: str) -> Candidate:
    kept: list[float] = []
    seeds: list[Any] = []
    left_out: list[str] = []
    for r in runs:
        outcome = run_outcome(r)
        if outcome == "diverged":
            kept.append(math.inf)
            seeds.append(r.seed)
            continue
        value = r.metric(metric)
        if outcome != "ok" or value is None:
            left_out.append(f"seed {r.seed}: {outcome if outcome != 'ok' else f'no {metric}'}")
            continue
        kept.append(value if math.isfinite(value) else math.inf)
        seeds.append(r.seed)
    score = (
        (math.inf if any(math.isinf(v) for v in kept) else sum(kept) / len(kept)) if kept else None
    )
    note = ("left out: " + "; ".join(left_out)) if left_out else ""
    return Candidate(values, runs, score, seeds, note)


def tune_variants(
    runs: Sequence[RunRecord], protocol: Protocol, ignore: Sequence[str]
) -> tuple[list[TunedVariant], list[str], dict[str, str]]:
    """(tuned variants in sweep order, the keys that vary between variants, the shared
    overrides)."""
    keys = list(protocol.tune)
    variants, varying, shared = group_runs(runs, [*ignore, *keys])
    out = []
    for v in variants:
        # nothing tuned: nothing to select, every run is a verdict run whatever its stage label
        stage = {id(r): protocol.stage_of(r.config) if keys else "grid" for r in v.runs}
        selection = [r for r in v.runs if stage[id(r)] in ("tune", "grid")]
        unlabelled = [r for r in v.runs if stage[id(r)] == "unlabelled"]
        by_values: dict[tuple[str, ...], list[RunRecord]] = {}
        for r in selection:
            by_values.setdefault(tuple(tuned_values(r, keys).values()), []).append(r)
        cands = [
            score_candidate(dict(zip(keys, vals)), rs, protocol.select)
            for vals, rs in sorted(by_values.items(), key=lambda kv: [_order(x) for x in kv[0]])
        ]
        scored = [c for c in cands if c.score is not None and not math.isinf(c.score)]
        chosen = min(scored, key=lambda c: c.score).values if scored else None  # type: ignore[arg-type,return-value]
        if not keys:  # nothing tuned: every run at the one "candidate"
            chosen = {}
        notes = [f"{c.label()}: {c.note}" for c in cands if c.note and keys]
        if unlabelled:
            notes.append(
                f"{len(unlabelled)} run(s) without protocol.stage under the two_stage design were "
                "not used"
            )
        if not cands:
            notes.append("no selection runs (stage tune or grid)")
        elif chosen is None:
            notes.append(
                "no candidate has a finite selection score (every one diverged, failed or never "
                "validated): nothing chosen"
            )
        edge = []
        if chosen is not None:
            for k in keys:
                grid = key_grid(protocol, cands, k)
                if len(grid) >= 2 and chosen[k] in (grid[0], grid[-1]):
                    edge.append(k)
        want = "confirm" if protocol.design == "two_stage" and keys else "grid"
        verdict = [
            r
            for r in v.runs
            if chosen is not None and stage[id(r)] == want and tuned_values(r, keys) == chosen
        ]
        if chosen is not None and not verdict and protocol.design == "two_stage":
            notes.append(
                "the confirm stage has not run at the chosen value (python -m src.study ... "
                "--stage confirm)"
            )
        extended = extensions_of(protocol, cands, keys, edge if chosen is not None else keys)
        verdict_runs = sorted(verdict, key=lambda r: str(r.seed))
        out.append(TunedVariant(v, cands, chosen, edge, verdict_runs, notes, extended))
    return out, varying, shared
