"""Assemble ``report.md`` from its sections (``src.reporting.sections``)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

from src.jsonfile import read_json
from src.reporting.comparisons import direction
from src.reporting.family_sections import family_lines, pairing_lines, seeds_lines, tests_text
from src.reporting.planning import SEEDS_PLAN, seeds_plan_line
from src.reporting.sections import (
    _comparisons_text,
    _evaluation_lines,
    _factorial_lines,
    _metric_table,
    _scored_lines,
    _secondary_comparison,
    _verdict_cells,
    fixed,
    one_line,
    plural,
    provenance_lines,
    significant,
    thousands,
)
from src.reporting.stats import POWER, summarize
from src.reporting.table import Report, VariantRow, counted
from src.studies.runs import RunRecord


def _roots_text(roots: Sequence[str], most: int = 3) -> str:
    """The run roots a report read: each one when there are few, else their count and common parent
    (a shell glob over a sweep's run directories would otherwise fill the report's first paragraph;
    runs.csv lists every run)."""
    if len(roots) <= most:
        return ", ".join(f"`{r}`" for r in roots)
    try:
        parent = os.path.commonpath([str(r) for r in roots])
    except ValueError:  # absolute and relative roots mixed: no common parent
        return ", ".join(f"`{r}`" for r in roots)
    return f"{len(roots)} run directories under `{parent}/` (each run in `runs.csv`)"


def _verdict_keys(metric: str, rows: Sequence[VariantRow]) -> list[str]:
    """The verdict metric and its per-length forms (``test/exact_match@12``:
    src/objectives/synthetic.py) that the tune runs recorded, in length order."""
    found = {
        k
        for row in rows
        for cand in row.tuned.candidates
        for r in cand.runs
        for k in (r.metrics or {})
        if k == metric or (k.startswith(metric + "@") and k[len(metric) + 1 :].isdigit())
    }
    return sorted(found, key=lambda k: (k != metric, int(k.split("@")[1]) if "@" in k else 0))


def _extension_lines(report: Report) -> list[str]:
    """The grid extensions ``python -m src.study`` made (each variant's candidates past the declared
    grid, read from its runs) and the variants whose verdicts stand at a value still at an edge."""
    p, rows = report.protocol, report.rows
    made = [(row, e) for row in rows for e in row.tuned.extensions]
    flagged = [row for row in rows if row.tuned.edge_verdicts]
    if not made and not flagged:
        return []
    lines = ["## Grid extensions", ""]
    if made:
        lines += [
            "A variant whose chosen value was the smallest or largest candidate ran one more "
            "candidate, one grid step past it, on its selection seeds, and was selected again (at "
            f"most protocol.max_grid_extensions={p.max_grid_extensions} per key; docs/studies.md, "
            "Grid extension).",
            "",
            "| variant | key | declared grid | added | edge closed |",
            "|---|---|---|---|---|",
        ]
        for row, e in made:
            chosen = f"chosen {(row.tuned.chosen or {}).get(e.key, 'none')}"
            lines.append(
                f"| {row.label} | `{e.key}` | {', '.join(p.tune.get(e.key, []))} | "
                f"{', '.join(e.added)} | {f'yes ({chosen})' if e.closed else f'**no** ({chosen})'} |"
            )
        lines.append("")
    else:
        lines += [f"None made (protocol.max_grid_extensions={p.max_grid_extensions}).", ""]
    if flagged:
        lines += [
            "Verdicts flagged **edge**: "
            + "; ".join(
                f"{row.label} ("
                + ", ".join(f"{k}={(row.tuned.chosen or {})[k]}" for k in row.tuned.edge)
                + ")"
                for row in flagged
            )
            + ": made at a chosen value still at an edge of its grid (protocol.allow_edge="
            f"{str(p.allow_edge).lower()}); the variant's best may lie outside the grid, so they "
            "hold at that value, not necessarily at its best.",
            "",
        ]
    return lines


def what_it_is(report: Report) -> list[str]:
    """The report's first line when it is no evidence about architectures: its baseline does not
    beat the bigram reference on the verdict metric (a smoke test), or no run has the verdict
    metric (``test=false``: the command that reports on validation instead)."""
    p, rows = report.protocol, report.rows
    if rows and not any(r.primary.n for r in rows) and any(counted(r.runs) for r in rows):
        split = p.metric.split("/")[0]
        return [
            f"**No run has `{p.metric}`** (the runs were trained with `test=false`, or the "
            f"{split} split was never scored), so no variant has a verdict figure. Report on the "
            "validation split instead: `python -m src.report <sweep dir> --metric val/loss` "
            "(a validation-split verdict also chose the learning rates: say so when you quote it).",
            "",
        ]
    split = p.metric.split("/")[0]
    bigram = next((r for r in report.references if r.order == 2), None)
    loss = bigram.loss(split) if bigram is not None and p.metric.endswith("/loss") else None
    base = rows[report.baseline].primary.mean if rows else None
    if loss is not None and base is not None and base >= loss:
        return [
            f"**A smoke test, not evidence about architectures:** the baseline's `{p.metric}` "
            f"({base:.4f}) does not beat the bigram reference row ({loss:.4f}), so the models "
            "have not learned more than adjacent-token statistics.",
            "",
        ]
    return []


def render_markdown(
    report: Report,
    *,
    title: str,
    roots: Sequence[str],
    runs: Sequence[RunRecord],
    plots: dict[str, Path | None],
    left_out: dict[str, int] | None = None,
) -> str:
    """``left_out``: the runs ``--stages`` kept out of the report, counted per stage (None: every
    run is in)."""
    p, rows = report.protocol, report.rows
    lines: list[str] = [f"# {title}", ""] + what_it_is(report)
    total_wall = sum(r.metric("wall_time_s") or 0.0 for r in runs)
    evaluated = [row for row in rows if row.evaluation_of is not None]
    lines += [
        f"{len(runs)} runs in {plural(len(rows) - len(evaluated), 'variant')}"
        + (
            f" and {plural(len(evaluated), 'evaluation-time variant')} of their weights"
            if evaluated
            else ""
        )
        + f" from {_roots_text(roots)}; total wall time of the runs {total_wall / 60:.1f} min.",
        "",
    ]
    if left_out is not None:
        kept = sorted({report.protocol.stage_of(r.config) for r in runs})
        lines += [
            f"**Stages {', '.join(kept)} only** (`--stages`): "
            + (
                ", ".join(f"{plural(k, 'run')} of stage {s}" for s, k in sorted(left_out.items()))
                + " left out of this report."
                if left_out
                else "the runs found hold no other stage."
            )
            + (
                " Without verdict runs (the confirm stage), it shows the choices of the tune stage "
                "and no verdict."
                if not any(counted(row.runs) for row in report.rows)
                else ""
            ),
            "",
        ]
    if report.shared:
        lines += [
            "Shared overrides: " + ", ".join(f"`{k}={v}`" for k, v in report.shared.items()),
            "",
        ]
    base = rows[report.baseline].label if rows else "–"
    margin = p.equivalence_margin
    margin_text = (
        "not set: `equivalent` is never concluded"
        if margin is None
        else f"±{margin} (in units of `{p.metric}`)"
        if isinstance(margin, (int, float))
        else "; ".join(f"`{k}` ±{v}" for k, v in margin.items())
    )
    tested = sum(report.sizes.values())
    lines += [
        "## Protocol",
        "",
        (
            "Declared by the runs' configs (`protocol:`). "
            if p.declared
            else "From the command line (the runs declare no protocol). "
        )
        + p.describe(
            report.secondary, matched="/".join(sorted({r.compute.match for r in rows})) or None
        ),
        "",
        f"Baseline: **{base}**. Comparisons: {_comparisons_text(p.comparisons)}, "
        f"on `{p.metric}`"
        + (f" and {len(report.secondary)} secondary metric(s)" if report.secondary else "")
        + f": {plural(len(report.comparisons), 'comparison')}, {tested} with a test. "
        + (
            f"{tests_text(report)}; two-sided, Holm-corrected within each family at α = "
            f"{report.alpha}; equivalence margin {margin_text} (TOST, Holm-corrected); MDE (t-tests) "
            f"= the smallest |Δ| the test at α/m of its family detects with {POWER:.0%} power given "
            "the observed spreads."
            if tested
            else "No comparison has a test (see the reasons in the table), so nothing is corrected "
            "and no verdict is possible."
        )
        + " How to read each column: docs/studies.md.",
        "",
    ]
    lines += family_lines(report)
    lines += _evaluation_lines(evaluated)
    auto = (
        seeds_plan_line(
            read_json(Path(roots[0]) / SEEDS_PLAN),
            [[str(r.seed) for r in counted(row.runs)] for row in rows],
        )
        if roots
        else None
    )
    lines += (
        ([auto, ""] if auto else [])
        + pairing_lines(report)
        + seeds_lines(report)
        + _factorial_lines(report)
    )
    # False: --stages tune (no verdict runs at all)
    verdicts = any(counted(row.runs) for row in rows)
    lines += [f"## Verdicts on `{p.metric}`", ""]
    if verdicts:
        lines += _metric_table(
            report, p.metric, [r.primary for r in rows], [r.comparison for r in rows], True, True
        )
    else:
        lines += [
            "None: no run of the report is a verdict run, so no variant has a figure to test. "
            "Chosen per variant (Tuning, below): "
            + "; ".join(
                f"{row.label} "
                + (", ".join(f"{k}={v}" for k, v in (row.tuned.chosen or {}).items()) or "–")
                for row in rows
            )
            + "."
        ]
    lines += [
        "",
        "`⚠ edge`: the chosen value is the smallest or largest candidate; the optimum may lie "
        "outside the grid."
        if any(r.tuned.edge for r in rows)
        else "",
        "",
    ]
    lines += _scored_lines(report)
    if report.reference_note:
        lines += [f"Reference rows: {report.reference_note}.", ""]

    if verdicts:  # --stages tune: no verdict runs to average, no compute table
        lines += [
            "## Compute",
            "",
            "| variant | params | training FLOPs / token | training tokens | training FLOPs | "
            "matched | tok/s | wall s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in rows:
            c = row.compute
            lines.append(
                f"| {row.label} | {thousands(c.params.mean)} | "
                f"{significant(c.flops_per_token.mean, 4)} | {thousands(c.tokens.mean)} | "
                f"{significant(c.train_flops.mean, 4)} | {c.match} | "
                f"{thousands(c.throughput.mean)} | {fixed(c.wall.mean, 0)} |"
            )
        lines += [
            "",
            "Means over the verdict runs. FLOPs per token are the model's own count (forward + "
            "backward, `budget.json`); training tokens are those up to the weights the verdict "
            "scored; training FLOPs = FLOPs per token × those tokens."
            + (
                " An evaluation-time variant's row repeats the training of the variant whose "
                "weights it scores (spent once; not in the total wall time above)."
                if evaluated
                else ""
            ),
            "",
        ]
    lines += provenance_lines(report)

    if p.tune:
        lines += [f"## Tuning (selection on `{p.select}`)", ""]
        keys = list(p.tune)
        # a report without verdict runs (--stages tune) shows the candidates' own verdict-metric
        # figures: the only ones it has (read, never used for the choice, which is on the selection
        # metric alone)
        shown = [] if verdicts else _verdict_keys(p.metric, rows)
        lines += [
            "| variant | "
            + " | ".join(keys)
            + f" | seeds | mean {p.select} | |"
            + "".join(f" {k} |" for k in shown),
            "|---|" + "---|" * (len(keys) + 3 + len(shown)),
        ]
        for row in rows:
            for cand in row.tuned.candidates:
                mark = (
                    ("**chosen**" + (" ⚠ edge" if row.tuned.edge else ""))
                    if cand.values == row.tuned.chosen
                    else ""
                )
                score = (
                    "diverged"
                    if cand.score is not None and math.isinf(cand.score)
                    else fixed(cand.score, 4)
                )
                figures = [summarize([r.metric(k) for r in cand.runs]).mean for k in shown]
                lines.append(
                    f"| {row.label} | "
                    + " | ".join(cand.values[k] for k in keys)
                    + f" | {len(cand.seeds)} | {score} | {mark} |"
                    + "".join(f" {fixed(x, 4)} |" for x in figures)
                )
        if shown:
            lines += [
                "",
                f"No verdict runs: {', '.join(f'`{k}`' for k in shown)} are the tune runs' own "
                "(mean over their seeds), shown for reading; the choice is on the selection "
                "metric alone.",
            ]
        notes = [f"- {row.label}: {n}" for row in rows for n in row.tuned.notes]
        lines += [""] + (notes + [""] if notes else [])
        lines += _extension_lines(report)

    if report.secondary and verdicts:
        lines += ["## Secondary metrics", ""]
        for key in report.secondary:
            way = direction(key)
            lines += [
                f"### `{key}`"
                + ("" if way else " (no better direction: verdicts say higher / lower)"),
                "",
            ]
            comps = [
                None if i == report.baseline else _secondary_comparison(report, key, i)
                for i in range(len(rows))
            ]
            lines += _metric_table(
                report, key, [r.secondary[key] for r in rows], comps, False, False
            ) + [""]

    extra = [c for c in report.comparisons if c.reference != base]
    if extra and verdicts:
        lines += [
            "## Pairs that differ in one factor",
            "",
            "| metric | variant | against | Δ [95% CI] | p | p (Holm) | verdict | MDE |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for c in extra:
            d, pv, ph, v, mde = _verdict_cells(c, False, 4)
            lines.append(
                f"| `{c.metric}` | {c.variant} | {c.reference} | {d} | {pv} | {ph} | {v} | {mde} |"
            )
        lines.append("")

    if report.references:
        lines += [
            "## n-gram references",
            "",
            "Interpolated Kneser-Ney models fitted on the training split with the runs' "
            "tokenisation, scored on the same validation and test tokens the runs were scored on "
            "(`ngram.json` of each run).",
            "",
            "| reference | val loss | val tokens | test loss | test tokens |",
            "|---|---|---|---|---|",
        ]
        for ref in report.references:
            lines.append(
                f"| {ref.name} | {fixed(ref.val, 4)} | {thousands(ref.val_tokens)} | "
                f"{fixed(ref.test, 4)} | {thousands(ref.test_tokens)} |"
            )
        lines.append("")

    matched = [row for row in rows if any(r.match for r in row.runs)]
    if matched:
        lines += [
            "## Matched parameter counts",
            "",
            "| variant | reference | reference params | params | difference | solved |",
            "|---|---|---|---|---|---|",
        ]
        for row in matched:
            m = next(r.match for r in row.runs if r.match)
            lines.append(
                f"| {row.label} | `{m.get('reference')}` | {m['reference_params']:,} | "
                f"{m['params']:,} | {100 * m['rel_error']:+.2f}% | {m.get('before')} → "
                f"{m.get('solved')} |"
            )
        lines.append("")

    lines += ["## Plots", ""]
    for name, path in plots.items():
        if path is not None:
            lines += [f"![{name}]({path.name})", ""]
    # an evaluation-time variant repeats its parent's
    errors = list(dict.fromkeys(e for row in rows for e in row.errors))
    lines += [
        "## Runs",
        "",
        "Outcomes: ok; no validation (ended before its first validation: not selectable, its test "
        "metrics count); diverged (a non-finite loss only; left out of means, counted here); "
        "failed (error below); incomplete (no metrics.json). `n` counts the seeds with a finite "
        "value. Every run, its stage, its role (selection / verdict) and every final metric: "
        "`runs.csv`; every comparison: `comparisons.csv`.",
        "",
    ]
    if errors:
        lines += ["Errors:", ""] + [f"- {e}" for e in errors] + [""]
    # an override's own newline cannot start a line
    return "\n".join(one_line(line) for line in lines)
