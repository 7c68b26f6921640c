"""The paragraphs of ``report.md`` that say how its verdicts were reached: the families (the
primary one's table first), the tests used and why, the pairing of each comparison, and the seeds a
verdict would need."""

from __future__ import annotations

from collections import Counter

import numpy as np

from src.reporting.comparisons import IDENTICAL, PRIMARY
from src.reporting.resampling import DRAWS, RESAMPLES
from src.reporting.sections import _verdict_cells, plural
from src.reporting.stats import POWER, seeds_needed
from src.reporting.table import Report

#: each test by its name in ``Comparison.test``
TEST_NAMES = {
    "paired": "the paired t-test (by seed, same data order)",
    "welch": "Welch's t-test",
    "sign-flip": f"the sign-flip test (by seed; BCa bootstrap interval, {RESAMPLES:,} resamples)",
    "permutation": f"the two-sample permutation test (BCa bootstrap interval, {RESAMPLES:,} "
    "resamples)",
}


def tests_text(report: Report) -> str:
    """Which tests the comparisons used, and why (``choose_test``)."""
    used = Counter((c.test, c.test_why) for c in report.comparisons if c.test)
    if not used:
        return "No test could be made"
    drawn = sum(c.p_floor is not None and not c.exact for c in report.comparisons)
    return (
        "By "
        + "; ".join(
            f"{TEST_NAMES[test]} for {plural(n, 'comparison')} ({why})"
            for (test, why), n in sorted(used.items())
        )
        + (
            f"; the permutation tests enumerate every assignment, except {drawn} that draw "
            f"{DRAWS:,} at random"
            if drawn
            else "; the permutation tests enumerate every assignment"
            if any(c.p_floor is not None for c in report.comparisons)
            else ""
        )
    )


def family_lines(report: Report) -> list[str]:
    """The primary family's table (the report's first), the identical pairs, and the sizes of the
    exploratory families."""
    primary = [c for c in report.comparisons if c.family == PRIMARY]
    lines = ["## Primary family: the declared questions", ""]
    if not primary:
        lines += [
            "No question was declared (`protocol.primary` is empty): every comparison below is "
            "exploratory, Holm-corrected within its own family.",
            "",
        ]
    else:
        m = report.sizes.get(PRIMARY, 0)
        source = report.protocol.questions_from
        lines += [
            (
                f"Declared in `{source}` after the runs (post hoc, so these are questions asked of "
                "data already seen). "
                if source
                else "Declared by the runs' protocol, before they ran. "
            )
            + f"Holm over these {plural(m, 'test')} alone, at α = {report.alpha}.",
            "",
            "| question | variant | against | metric | test | Δ [95% CI] | p | p (Holm) | verdict "
            "| expected |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for c in primary:
            d, pv, ph, v, _ = _verdict_cells(c, False, 4)
            lines.append(
                f"| {c.row} | {c.variant} | {c.reference} | `{c.metric}` | {c.test or '–'} | {d} "
                f"| {pv} | {ph} | {v} | {c.expect or '–'} |"
            )
        lines.append("")
    others = {k: m for k, m in report.sizes.items() if k != PRIMARY}
    if others:
        lines += [
            "Exploratory families (each Holm-corrected on its own; a verdict there is a lead for a "
            "declared question, not a finding): "
            + "; ".join(f"`{k}` ({plural(m, 'test')})" for k, m in others.items())
            + ".",
            "",
        ]
    same = [c for c in report.comparisons if c.family == IDENTICAL]
    if same:
        lines += [
            "Identical by construction (every seed gives both sides the same value, to float32's "
            "last bits; not a test, in no family): "
            + "; ".join(f"`{c.metric}` {c.variant} vs {c.reference}" for c in same)
            + ".",
            "",
        ]
    return lines


def pairing_lines(report: Report) -> list[str]:
    """The primary metric's comparisons: their test, pairs and pairing correlation, or why they are
    not paired."""
    rows = []
    for c in report.comparisons:
        if c.metric != report.protocol.metric or not c.test:
            continue
        if c.test in ("paired", "sign-flip"):
            r = "–" if c.correlation is None else f"{c.correlation:+.2f}"
            rows.append(f"| {c.variant} | {c.reference} | {c.test} | {c.pairs} | {r} | |")
        else:
            rows.append(f"| {c.variant} | {c.reference} | {c.test} | – | – | {c.pairing_note} |")
    if not rows:
        return []
    return [
        "| variant | against | test | pairs | r (paired runs) | why not paired |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def seeds_lines(report: Report) -> list[str]:
    """When no comparison on the verdict metric reaches a verdict: say so once, and how many seeds
    per variant a verdict on each observed |Δ| would need at the observed spread (α/m, 80 %
    power)."""
    primary = [c for c in report.comparisons if c.metric == report.protocol.metric]
    if not primary or any(c.verdict in ("better", "worse", "equivalent") for c in primary):
        return []
    if not any(r.primary.n for r in report.rows):  # no run has the metric: seeds would not help
        return []
    needs, no_spread = [], Counter()
    for c in primary:
        if c.test == "paired":
            d = np.subtract(*c.values)
            n = seeds_needed(
                c.delta or 0.0,
                float(np.std(d, ddof=1)),
                alpha=report.alpha / max(report.sizes.get(c.family, 1), 1),
                paired=True,
            )
        elif c.test == "welch":
            n = seeds_needed(
                c.delta or 0.0,
                float(np.std(c.values[0], ddof=1)),
                float(np.std(c.values[1], ddof=1)),
                alpha=report.alpha / max(report.sizes.get(c.family, 1), 1),
            )
        else:
            no_spread[c.reason] += (
                1  # said once per reason: a tune-only report has it on every pair
            )
            continue
        needs.append(
            f"{c.variant} vs {c.reference}: |Δ| = {abs(c.delta or 0.0):.3g} would need "
            + (f"about {n} seeds per variant" if n else "more than 1000 seeds per variant")
            + f" ({'paired' if c.test == 'paired' else 'Welch'}, now {min(c.n)})"
        )
    needs += [
        f"{'all ' if k == len(primary) and k > 1 else ''}{plural(k, 'comparison')}: no spread to "
        f"plan from ({reason})"
        for reason, k in no_spread.items()
    ]
    return [
        "**Too few seeds for a verdict.** No comparison on the verdict metric is better, worse or "
        f"equivalent. At the observed spreads (α/m, {POWER:.0%} power): " + "; ".join(needs) + ".",
        "",
    ]
