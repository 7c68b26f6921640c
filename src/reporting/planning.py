"""Power planning before the confirm runs: ``python -m src.study experiment=study_<name> --plan``.

For each comparison the protocol will make on its verdict metric (each variant against the
baseline), the seeds per variant needed to detect ``protocol.target_mde`` at α/m (Holm's first
step) with 80 % power, under the paired design (by seed, the spread of the per-seed differences)
and the unpaired one (Welch, the two spreads), and the compute that implies. The spreads come
from the tune stage's runs at each variant's chosen candidate (values of the verdict metric, else
the selection metric); ``protocol.pilot_sd`` stands in when those runs have fewer than two seeds
(for the unpaired design only: a pilot standard deviation says nothing of the pairing). Seeds
are found with ``src.reporting.stats.seeds_needed`` (noncentral t). The compute per run is the
tune runs' mean wall time and training FLOPs (``budget.json``'s FLOPs per token × tokens seen).

The family is the declared primary one when the protocol declares questions (``protocol.primary``
and the primary interactions: ``primary_size``), else every variant against the baseline. Where the
verdict will come from the exact sign-flip test (``protocol.test=permutation``, or ``auto`` on a
bounded metric: ``src.reporting.comparisons.choose_test``), no p can be below ``2 / 2^n`` with n
seeds, so no verdict is possible below ``pairs_for_floor(α/m)`` seeds whatever the spread: the plan
says so and never plans fewer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from src.errors import ConfigError
from src.reporting.comparisons import bounded
from src.reporting.resampling import pairs_for_floor, sign_flip_floor
from src.reporting.stats import POWER, seeds_needed
from src.studies.protocol import Protocol
from src.studies.runs import RunRecord
from src.studies.tuning import TunedVariant

#: ``protocol.seeds: auto``: the confirm stage's choice of seeds and why (written by ``python -m
#: src.study``)
SEEDS_PLAN = "seeds_plan.json"
#: the reason a plan has no number of seeds when the spread is known (``seeds_needed``'s cap)
OVER = "over 1,000 seeds"


def seeds_plan_line(record: dict | None, ran: Sequence[Sequence[str]] = ()) -> str | None:
    """The report's sentence on an automatic choice of confirm seeds, from ``seeds_plan.json``,
    checked against ``ran``: each variant's seeds among the verdict runs the report reads. Where
    they differ from the plan, the sentence says so, with both sets."""
    if not record or not record.get("seeds"):
        return None
    whys = record.get("why") or [""] * len(record.get("needed") or [])
    needs = ", ".join(
        f"{v}: {n if n is not None else (why or 'no spread, or over 1,000 seeds')}"
        for v, n, why in zip(record.get("variants") or [], record.get("needed") or [], whys)
    )
    planned = [str(s) for s in record["seeds"]]
    line = (
        f"protocol.seeds: auto planned {len(planned)} seeds ({', '.join(planned)}): the seeds per "
        f"variant --plan found for a difference of {record.get('target_mde')} ({needs})"
        + (
            f", capped by protocol.max_seeds={record.get('max_seeds')}"
            if record.get("capped")
            else ""
        )
    )
    seen = [sorted(map(str, s), key=_seed_order) for s in ran]
    if seen and all(set(s) == set(planned) for s in seen):
        return line + "; every variant's verdict runs are on exactly these seeds."
    found = sorted({s for group in seen for s in group}, key=_seed_order)
    return (
        line
        + ". The verdict runs read here differ from that plan: their seeds are "
        + (", ".join(found) if found else "none")
        + " (a confirm stage not finished, or run on other seeds since); the verdicts below are "
        "on the runs, not on the plan."
    )


def _seed_order(seed: str) -> tuple[int, str]:
    return (int(seed), "") if seed.lstrip("-").isdigit() else (0, seed)


@dataclass
class PlanRow:
    """One comparison's plan: seeds per variant for the target MDE, paired and unpaired."""

    variant: str
    reference: str
    sd: tuple[float | None, float | None]  # the two sides' standard deviations (or the pilot's)
    sd_diff: float | None  # of the per-seed differences (paired design)
    pairs: int  # shared seeds the paired spread came from
    unpaired: int | None  # seeds per variant (None: no spread, or more than 1000)
    paired: int | None
    source: str  # where the spread came from

    def why_none(self, paired: bool) -> str:
        """Why the plan of one design has no number of seeds: no spread to plan from, or more
        than 1,000 seeds (the target difference is out of reach at the measured spread)."""
        if paired:
            return "no paired spread" if self.sd_diff is None else OVER
        return "no spread" if None in self.sd else OVER

    def needed(self) -> tuple[int | None, str]:
        """(seeds per variant the confirm stage needs: the paired plan, else the unpaired one; why
        there is none, in ``why_none``'s words: more than 1,000 seeds where either design measured
        a spread, else no spread)."""
        n = self.paired if self.paired is not None else self.unpaired
        if n is not None:
            return n, ""
        return None, OVER if OVER in (self.why_none(True), self.why_none(False)) else "no spread"


@dataclass
class PowerPlan:
    rows: list[PlanRow]
    target_mde: float
    alpha: float  # the level each test is held to: α / m
    run_seconds: float | None  # mean wall time of one tune run
    run_flops: float | None  # mean training FLOPs of one tune run
    variants: int
    family: int = 1  # m: the tests Holm corrects together
    # the fewest seeds at which the exact test can reach α/m; None: the t-test will decide
    floor_seeds: int | None = None
    floor_why: str = ""

    def compute(self, seeds: int | None) -> str:
        if seeds is None:
            return "–"
        runs = seeds * self.variants
        parts = [f"{runs} runs"]
        if self.run_seconds is not None:
            parts.append(f"{runs * self.run_seconds / 3600:.2g} h")
        if self.run_flops is not None:
            parts.append(f"{runs * self.run_flops:.3g} FLOPs")
        return ", ".join(parts)

    def render(self) -> str:
        lines = [
            f"Seeds per variant to detect |Δ| = {self.target_mde:g} with {POWER:.0%} power at α/m "
            f"= {self.alpha:.3g} ({len(self.rows)} comparison(s) on the verdict metric):",
            "",
            "| variant | against | spread from | sd (variant, reference) | sd of differences "
            "(pairs) | unpaired (Welch) | paired | compute, unpaired | compute, paired |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        out_of_reach = False
        for r in self.rows:
            sd = ", ".join("–" if s is None else f"{s:.3g}" for s in r.sd)
            diff = "–" if r.sd_diff is None else f"{r.sd_diff:.3g} ({r.pairs})"
            cells = []
            for k, paired in ((r.unpaired, False), (r.paired, True)):
                why = r.why_none(paired) if k is None else ""
                out_of_reach = out_of_reach or why == OVER
                cells.append(str(k) if k is not None else f"– ({why})")
            lines.append(
                f"| {r.variant} | {r.reference} | {r.source} | {sd} | {diff} | {cells[0]} | "
                f"{cells[1]} | {self.compute(r.unpaired)} | {self.compute(r.paired)} |"
            )
        lines += [
            "",
            "Compute: seeds × variants runs at the tune runs' mean wall time and training FLOPs "
            "per run.",
        ]
        if out_of_reach:
            lines += [
                "",
                f"– ({OVER}): protocol.target_mde={self.target_mde:g} is out of reach at this "
                "spread: detecting it would need more than 1,000 seeds per variant. "
                "Raise protocol.target_mde to a difference the study can afford to detect.",
            ]
        if any(r.unpaired is None and None in r.sd for r in self.rows):
            lines += [
                "",
                "– (no spread): the tune runs have fewer than two seeds per variant; set "
                "protocol.pilot_sd (a pilot standard deviation of the verdict metric).",
            ]
        if any(r.paired is None and r.sd_diff is None for r in self.rows):
            lines += [
                "",
                "– (no paired spread): no tune runs of a variant and its reference share two "
                "seeds (a pilot spread plans the unpaired design only).",
            ]
        if self.floor_seeds is not None:
            n = self.floor_seeds
            lines += [
                "",
                f"The verdicts will come from the exact sign-flip test ({self.floor_why}): with n "
                "seeds its smallest two-sided p is 2/2^n, so at α/m = "
                f"{self.alpha:.3g} ({self.family} test{'s' if self.family != 1 else ''} in the "
                f"family) no verdict is possible with fewer than {n} seeds per variant "
                f"(2/2^{n - 1} = {sign_flip_floor(n - 1):.3g}; 2/2^{n} = {sign_flip_floor(n):.3g}). "
                "The paired column above never plans fewer.",
            ]
        return "\n".join(lines)


def _values(runs: Sequence[RunRecord], metric: str, select: str) -> dict[str, float]:
    """seed -> the run's verdict metric (else its selection metric), finite values only."""
    out: dict[str, float] = {}
    for r in runs:
        v = r.metric(metric)
        v = r.metric(select) if v is None else v
        if v is not None and np.isfinite(v):
            out[str(r.seed)] = float(v)
    return out


def _sd(values: Sequence[float]) -> float | None:
    return float(np.std(values, ddof=1)) if len(values) >= 2 else None


def power_plan(
    tuned: Sequence[TunedVariant],
    varying: Sequence[str],
    baseline: int,
    protocol: Protocol,
    target_mde: float,
    pilot_sd: float | None = None,
    alpha: float = 0.05,
) -> PowerPlan:
    """The plan of every variant against the baseline (module doc); ``varying``: the keys that name
    a variant (``tune_variants``' second result)."""
    if not target_mde or target_mde <= 0:
        raise ConfigError(
            f"protocol.target_mde={target_mde!r}: give the smallest difference of "
            f"{protocol.metric} the study must detect, in its units, e.g. protocol.target_mde=0.02"
        )
    chosen = []
    for t in tuned:
        cand = next((c for c in t.candidates if c.values == t.chosen), None)
        chosen.append(
            _values(cand.runs if cand is not None else [], protocol.metric, protocol.select)
        )
    m = primary_size(protocol) or max(1, len(tuned) - 1)
    level = alpha / m
    floor, why = exact_floor(protocol, level)
    rows = []
    for i, t in enumerate(tuned):
        if i == baseline:
            continue
        a, b = chosen[i], chosen[baseline]
        sd_a, sd_b = _sd(list(a.values())), _sd(list(b.values()))
        source = "tune runs"
        if sd_a is None or sd_b is None:
            if pilot_sd is None:
                source = "none: the tune runs have < 2 seeds; set protocol.pilot_sd"
            else:
                sd_a, sd_b, source = pilot_sd, pilot_sd, "protocol.pilot_sd"
        shared = sorted(set(a) & set(b))
        diffs = [a[s] - b[s] for s in shared]
        sd_d = _sd(diffs)
        unpaired = (
            seeds_needed(target_mde, sd_a, sd_b, alpha=level)
            if sd_a is not None and sd_b is not None
            else None
        )
        paired = (
            seeds_needed(target_mde, sd_d, alpha=level, paired=True) if sd_d is not None else None
        )
        if sd_d == 0.0:
            paired = 2
        if floor is not None and paired is not None:
            paired = max(paired, floor)
        rows.append(
            PlanRow(
                t.variant.label(varying),
                tuned[baseline].variant.label(varying),
                (sd_a, sd_b),
                sd_d,
                len(shared),
                unpaired,
                paired,
                source,
            )
        )
    runs = [r for t in tuned for c in t.candidates for r in c.runs]
    walls = [r.metric("wall_time_s") for r in runs if r.metric("wall_time_s")]
    flops = [
        (r.budget or {}).get("flops_per_token", 0) * (r.metric("tokens_seen") or 0) for r in runs
    ]
    flops = [f for f in flops if f]
    return PowerPlan(
        rows,
        float(target_mde),
        level,
        float(np.mean(walls)) if walls else None,
        float(np.mean(flops)) if flops else None,
        len(tuned),
        m,
        floor,
        why,
    )


def primary_size(protocol: Protocol) -> int:
    """The declared primary family's size (0 when nothing is declared)."""
    return len(protocol.primary) + sum(i.family == "primary" for i in protocol.interactions)


def exact_floor(protocol: Protocol, level: float) -> tuple[int | None, str]:
    """(the fewest seeds whose sign-flip test can reach ``level``, why that test) when the verdict
    metric will be tested by permutation; (None, "") when the t-test will decide."""
    if protocol.test == "permutation":
        return pairs_for_floor(level), "protocol.test=permutation"
    if protocol.test == "auto" and bounded(protocol.metric):
        return pairs_for_floor(level), f"protocol.test=auto on the bounded {protocol.metric}"
    return None, ""


def pilot_plan(
    labels: Sequence[str],
    baseline: int,
    target_mde: float,
    pilot_sd: float | None,
    alpha: float = 0.05,
    protocol: Protocol | None = None,
) -> PowerPlan:
    """Before any run: every variant against the baseline at the pilot spread (unpaired only)."""
    m = (primary_size(protocol) if protocol else 0) or max(1, len(labels) - 1)
    floor, why = exact_floor(protocol, alpha / m) if protocol else (None, "")
    n = seeds_needed(target_mde, pilot_sd, pilot_sd, alpha=alpha / m) if pilot_sd else None
    rows = [
        PlanRow(
            label, labels[baseline], (pilot_sd, pilot_sd), None, 0, n, None, "protocol.pilot_sd"
        )
        for i, label in enumerate(labels)
        if i != baseline
    ]
    return PowerPlan(rows, float(target_mde), alpha / m, None, None, len(labels), m, floor, why)
