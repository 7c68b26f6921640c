"""Write the report: ``report.md`` and its CSV files.

* ``report.csv`` — one row per variant, the verdict metric: ``variant, n_seeds, mean, std,
  ci_low, ci_high, delta, delta_ci_low, delta_ci_high, p, p_holm, verdict, mde`` and one column
  per tuned key (the chosen value);
* ``runs.csv`` — one row per run: ``variant, seed, stage, role``, every tuned value, the outcome,
  compute, and every final metric (val and test, primary and secondary), so every number of the
  report can be recomputed; ``evaluation_of`` marks the rows of an evaluation-time variant
  (``--eval-variants``: its parent variant's label; the same weights, no training of its own);
* ``comparisons.csv`` — every comparison of the family (each metric, each pair);
* ``tuning.csv`` — each variant's candidates with their selection score;
* ``references.csv`` — the n-gram reference rows.
"""

from __future__ import annotations

import csv
import math
import os
import unicodedata
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from src.files import atomic_path
from src.jsonfile import read_json
from src.provenance import FIELDS as PROVENANCE_FIELDS
from src.reporting.comparisons import CONSTANT, Comparison, direction
from src.reporting.planning import SEEDS_PLAN, seeds_plan_line
from src.reporting.stats import POWER, Summary, seeds_needed, summarize
from src.reporting.table import Report, VariantRow, counted
from src.studies.outcomes import run_outcome
from src.studies.protocol import compared_factor
from src.studies.runs import RunRecord
from src.studies.tuning import tuned_values

REPORT_COLUMNS = (
    "variant",
    "n_seeds",
    "mean",
    "std",
    "ci_low",
    "ci_high",
    "delta",
    "delta_ci_low",
    "delta_ci_high",
    "p",
    "p_holm",
    "verdict",
    "mde",
    "n_diverged",
    "diverged_share",
)
RUN_COLUMNS = ("variant", "seed", "stage", "role")
RUN_FIGURES = (
    "params",
    "tokens_seen",
    "global_step",
    "best_step",
    "scored_weights",
    "scored_step",
    "wall_time_s",
    "throughput_tokens_per_s",
)


def fixed(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{x:.{digits}f}"


def significant(x: float | None, digits: int = 3) -> str:
    return (
        "–" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}g}"
    )


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def thousands(x: float | None) -> str:
    return "–" if x is None else f"{int(round(x)):,}"


def _ci(lo: float | None, hi: float | None, digits: int = 3) -> str:
    return "–" if lo is None or hi is None else f"[{lo:.{digits}f}, {hi:.{digits}f}]"


def one_line(text: str) -> str:
    """``text`` with every control character (newlines, escapes, bidi overrides) written as its
    ``\\n``/``\\x1b``/``\\u202e`` escape: text read from a run (an override, an error) stays on its
    line of report.md and cannot add lines, headings or terminal codes of its own."""
    return "".join(
        ch
        if ch == "\t" or unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp")
        else ch.encode("unicode_escape").decode("ascii")
        for ch in text
    )


def write_csv(
    path: Path,
    records: Sequence[dict[str, Any]],
    columns: Sequence[str] = (),
    *,
    root: Path | None = None,
) -> Path:
    """``records`` as CSV at ``path`` (``columns`` first, then every other key in order of
    appearance), atomically and confined to ``root`` (src/files.py); the csv module quotes any
    newline in a value."""
    keys = list(columns)
    for r in records:
        keys += [k for k in r if k not in keys]
    with atomic_path(path, root=root) as tmp, tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in records:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in keys})
    return path


# --------------------------------------------------------------------------- CSV records
def report_records(report: Report) -> list[dict[str, Any]]:
    out = []
    for i, row in enumerate(report.rows):
        c, s = row.comparison, row.primary
        rec: dict[str, Any] = {
            "variant": row.label,
            "n_seeds": s.n,
            "mean": s.mean,
            "std": s.std,
            "ci_low": s.ci_low,
            "ci_high": s.ci_high,
        }
        n_diverged, n_runs = row.diverged
        rec.update(
            {"n_diverged": n_diverged, "diverged_share": n_diverged / n_runs if n_runs else None}
        )
        rec.update(
            {
                "delta": c.delta,
                "delta_ci_low": c.delta_ci_low,
                "delta_ci_high": c.delta_ci_high,
                "p": c.p,
                "p_holm": c.p_holm,
                "verdict": c.verdict,
                "mde": c.mde,
            }
            if c is not None
            else {"verdict": "baseline" if i == report.baseline else ""}
        )
        rec.update({k: (row.tuned.chosen or {}).get(k) for k in report.protocol.tune})
        out.append(rec)
    return out


def run_records(report: Report) -> list[dict[str, Any]]:
    keys = list(report.protocol.tune)
    metric_keys = sorted(
        {
            k
            for row in report.rows
            for r in row.variant.runs
            for k, v in (r.metrics or {}).items()
            if "/" in k and (v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)))
        }
    )
    recs = []
    for row in report.rows:
        for r in sorted(
            row.variant.runs,
            key=lambda r: (report.protocol.stage_of(r.config), str(r.seed), str(r.path)),
        ):
            m = r.metrics or {}
            b = r.budget or {}
            per_token, tokens = b.get("flops_per_token"), m.get("tokens_seen")
            stage = report.protocol.stage_of(r.config)
            rec: dict[str, Any] = {
                "variant": row.label,
                "seed": r.seed,
                "stage": "" if stage == "unlabelled" else stage,
                "role": row.tuned.role(r, report.protocol),
                **tuned_values(r, keys),
                "outcome": run_outcome(r),
                "status": r.status,
                "flops_per_token": per_token,
                "train_flops": per_token * tokens
                if per_token is not None and tokens is not None
                else None,
                "match": b.get("match"),
            }
            rec.update({k: m.get(k) for k in RUN_FIGURES})
            rec.update({k: m.get(k) for k in metric_keys})
            rec.update({"run_dir": str(r.path), "error": m.get("error")})
            prov = m.get("provenance") if isinstance(m.get("provenance"), dict) else {}
            rec.update({f"provenance/{k}": prov.get(k) for k in PROVENANCE_FIELDS})
            rec["evaluation_of"] = row.evaluation_of
            if (
                row.evaluation_of is not None
            ):  # its training is its parent's row: summing the column counts it once
                rec.update(train_flops=None, wall_time_s=None)
            recs.append(rec)
    return recs


def provenance_lines(report: Report) -> list[str]:
    """What code, libraries and devices the verdict runs came from (metrics.json's ``provenance``),
    and a warning when they differ within the study: a comparison across commits or versions is not
    one factor."""
    runs = [
        r for row in report.rows if row.evaluation_of is None for r in row.runs
    ]  # trained runs, each once
    seen: dict[str, Counter] = {k: Counter() for k in PROVENANCE_FIELDS}
    missing = 0
    for r in runs:
        prov = (r.metrics or {}).get("provenance")
        if not isinstance(prov, dict):
            missing += 1
            continue
        for k in PROVENANCE_FIELDS:
            seen[k][str(prov.get(k))] += 1
    if not runs:  # a tune-stage-only report (--stages tune): no verdict runs to describe
        return []
    if missing == len(runs):
        return [
            "## Provenance",
            "",
            f"None of the {plural(len(runs), 'verdict run')} recorded its provenance "
            "(metrics.json written before provenance was recorded).",
            "",
        ]
    lines = ["## Provenance", "", "| field | value (verdict runs) |", "|---|---|"]
    for k in PROVENANCE_FIELDS:
        values = seen[k]
        lines.append(
            f"| {k} | "
            + "; ".join(f"{v} ({n})" if len(values) > 1 else v for v, n in values.most_common())
            + " |"
        )
    differ = [
        k
        for k in (
            "git_commit",
            "git_diff_sha256",
            "python",
            "torch",
            "lightning",
            "transformers",
            "hydra",
        )
        if len(seen[k]) > 1
    ]
    dirty = seen["git_dirty"].get("True", 0)
    lines.append("")
    if differ:
        lines += [
            f"**Warning: the verdict runs differ in {', '.join(differ)}.** Their differences mix "
            "the variants' effect with the code's or the libraries'; rerun them on one commit and "
            "one environment.",
            "",
        ]
    if dirty:
        lines += [
            f"{plural(dirty, 'verdict run')} ran from a tree with uncommitted changes "
            "(`git_diff_sha256` identifies the diff).",
            "",
        ]
    if missing:
        lines += [f"{plural(missing, 'verdict run')} recorded no provenance.", ""]
    return lines


def comparison_records(report: Report) -> list[dict[str, Any]]:
    return [
        {
            "metric": c.metric,
            "variant": c.variant,
            "reference": c.reference,
            "n_variant": c.n[0],
            "n_reference": c.n[1],
            "delta": c.delta,
            "delta_ci_low": c.delta_ci_low,
            "delta_ci_high": c.delta_ci_high,
            "p": c.p,
            "p_holm": c.p_holm,
            "margin": c.margin,
            "p_tost": c.p_tost,
            "p_tost_holm": c.p_tost_holm,
            "mde": c.mde,
            "verdict": c.verdict,
            "reason": c.reason,
            "test": c.test,
            "pairs": c.pairs,
            "correlation": c.correlation,
            "pairing_note": c.pairing_note,
        }
        for c in report.comparisons
    ]


def tuning_records(report: Report) -> list[dict[str, Any]]:
    out = []
    for row in report.rows:
        for cand in row.tuned.candidates:
            out.append(
                {
                    "variant": row.label,
                    **cand.values,
                    "n_seeds": len(cand.seeds),
                    "seeds": " ".join(map(str, cand.seeds)),
                    f"mean {report.protocol.select}": cand.score,
                    "chosen": cand.values == row.tuned.chosen,
                    "edge": ", ".join(row.tuned.edge) if cand.values == row.tuned.chosen else "",
                    "note": cand.note,
                }
            )
    return out


def reference_records(report: Report) -> list[dict[str, Any]]:
    return [
        {
            "reference": f"{ref.name} (Kneser-Ney)",
            "order": ref.order,
            "val_loss": ref.val,
            "val_tokens": ref.val_tokens,
            "test_loss": ref.test,
            "test_tokens": ref.test_tokens,
        }
        for ref in report.references
    ]


def write_all(report: Report, out: Path) -> dict[str, Path]:
    """The CSV files of ``report`` in ``out`` (confined to it: src/files.py)."""
    return {
        "report.csv": write_csv(
            out / "report.csv", report_records(report), REPORT_COLUMNS, root=out
        ),
        "runs.csv": write_csv(out / "runs.csv", run_records(report), RUN_COLUMNS, root=out),
        "comparisons.csv": write_csv(out / "comparisons.csv", comparison_records(report), root=out),
        "tuning.csv": write_csv(out / "tuning.csv", tuning_records(report), root=out),
        "references.csv": write_csv(out / "references.csv", reference_records(report), root=out),
    }


# --------------------------------------------------------------------------- markdown
def _chosen(row: VariantRow) -> str:
    if row.tuned.chosen is None:
        return "none"
    return (
        ", ".join(
            f"{k.split('.')[-1]}={v}" + (" ⚠ edge" if k in row.tuned.edge else "")
            for k, v in row.tuned.chosen.items()
        )
        or "–"
    )


def _verdict_cells(c: Comparison | None, baseline: bool, digits: int = 3) -> list[str]:
    if baseline:
        return ["–", "–", "–", "baseline", "–"]
    if c is None:
        return ["–", "–", "–", "–", "–"]
    delta = (
        "–"
        if c.delta is None
        else f"{c.delta:+.{digits}f} {_ci(c.delta_ci_low, c.delta_ci_high, digits)}"
    )
    verdict = c.verdict + (f" ({c.reason})" if c.reason else "")
    return [
        delta,
        significant(c.p),
        significant(c.p_holm),
        f"**{verdict}**" if c.verdict in ("better", "worse", "equivalent") else verdict,
        fixed(c.mde, digits),
    ]


def _tests_text(report: Report) -> str:
    """Which tests the family used: paired by seed where both sides share seeds and data order, else
    Welch's."""
    used = Counter(c.test for c in report.comparisons if c.test)
    if not used:
        return "No test could be made"
    names = {
        "paired": "the paired t-test (by seed, same data order)",
        "welch": "Welch's t-test",
        CONSTANT: "the paired t-test's limit where every seed shows the same difference (p = 0 for a nonzero "
        "one; p = 1 and equivalent within any margin for none)",
    }
    return "By " + " and ".join(
        f"{names[k]} for {plural(n, 'comparison')}" for k, n in sorted(used.items())
    )


def _pairing_lines(report: Report) -> list[str]:
    """The primary metric's comparisons: their test, pairs and pairing correlation, or why they are
    not paired."""
    rows = []
    for c in report.comparisons:
        if c.metric != report.protocol.metric or not c.test:
            continue
        if c.test in ("paired", CONSTANT):
            r = "–" if c.correlation is None else f"{c.correlation:+.2f}"
            rows.append(f"| {c.variant} | {c.reference} | {c.test} | {c.pairs} | {r} | |")
        else:
            rows.append(f"| {c.variant} | {c.reference} | Welch | – | – | {c.pairing_note} |")
    if not rows:
        return []
    return [
        "| variant | against | test | pairs | r (paired runs) | why not paired |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def _seeds_lines(report: Report) -> list[str]:
    """When no comparison on the verdict metric reaches a verdict: say so once, and how many seeds
    per variant a verdict on each observed |Δ| would need at the observed spread (α/m, 80 %
    power)."""
    primary = [c for c in report.comparisons if c.metric == report.protocol.metric]
    if not primary or any(c.verdict in ("better", "worse", "equivalent") for c in primary):
        return []
    needs, no_spread = [], Counter()
    for c in primary:
        if c.test == "paired":
            d = np.subtract(*c.values)
            n = seeds_needed(
                c.delta or 0.0,
                float(np.std(d, ddof=1)),
                alpha=report.alpha / max(report.m, 1),
                paired=True,
            )
        elif c.test == "welch":
            n = seeds_needed(
                c.delta or 0.0,
                float(np.std(c.values[0], ddof=1)),
                float(np.std(c.values[1], ddof=1)),
                alpha=report.alpha / max(report.m, 1),
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


def _scored_lines(report: Report) -> list[str]:
    """Which weights the verdict metric scored in the verdict runs: the best by validation, or the
    final ones, at which step."""
    seen: Counter = Counter()
    for row in report.rows:
        for r in (
            counted(row.runs) if row.evaluation_of is None else ()
        ):  # an evaluation-time variant: its parent's
            kind, step = (
                (r.metrics or {}).get("scored_weights"),
                (r.metrics or {}).get("scored_step"),
            )
            seen[(kind or "not recorded", step)] += 1
    if not seen:
        return []
    parts = [
        f"{'best by validation' if k == 'best' else k} at step {s} ({plural(n, 'run')})"
        if s is not None
        else f"{k} ({plural(n, 'run')})"
        for (k, s), n in sorted(seen.items(), key=lambda x: (str(x[0][0]), x[0][1] or 0))
    ]
    return [
        f"Weights the verdict scored: {'; '.join(parts)}. The compute below counts the training "
        "tokens up to them.",
        "",
    ]


def _comparisons_text(comparisons: str) -> str:
    along = compared_factor(comparisons)
    if along is not None:
        return (
            f"every pair of variants that differ in `{along}` alone (`--comparisons {comparisons}`)"
        )
    return (
        "each variant against the baseline"
        if comparisons == "baseline"
        else "each variant against the baseline, and every pair of variants that differ in one factor"
    )


def _factorial_lines(report: Report) -> list[str]:
    """A hint when the variants form a full grid over two or more factors but only the baseline is
    compared."""
    if report.protocol.comparisons != "baseline" or len(report.varying) < 2:
        return []
    cells = {tuple(row.variant.values().get(k) for k in report.varying) for row in report.rows}
    levels = [len({cell[i] for cell in cells}) for i in range(len(report.varying))]
    if min(levels) < 2 or len(cells) != int(np.prod(levels)):
        return []
    return [
        "This sweep is factorial ("
        + " × ".join(f"{n} `{k}`" for n, k in zip(levels, report.varying))
        + "): `--comparisons one_factor` also compares every pair of variants that differ in one factor, which "
        "answers each factor's question at every level of the others.",
        "",
    ]


def not_applicable(row: VariantRow, key: str) -> str | None:
    """Why ``extrapolation/ppl@<f>x`` is missing for this variant (extrapolation.json or
    metrics.json), or a run-level value a run records as null with a ``<key>_reason``
    (``probe/induction_step``: "not reached: …")."""
    reasons = sorted(
        {
            str(r.metrics[f"{key}_reason"])
            for r in row.runs
            if (r.metrics or {}).get(f"{key}_reason")
        }
    )
    if reasons:
        return "; ".join(reasons)
    if row.evaluation_of is not None and not (
        key.startswith("extrapolation/") and key.count("/") == 1
    ):
        return (
            f"evaluation-time variant of {row.evaluation_of}'s weights: compared on its scaled "
            "`extrapolation/ppl@…`, `extrapolation/loss@…` only"
        )
    if not key.startswith("extrapolation/") or "@" not in key:
        return None
    tag = key.split("@")[-1]
    for r in row.runs:
        note = (r.metrics or {}).get(f"extrapolation/note@{tag}")
        for x in (r.extrapolation or {}).get("lengths", []):
            f = float(x.get("factor", 0))
            if (f"{int(f)}x" if f.is_integer() else f"{f:g}x") == tag and x.get("note"):
                note = note or x["note"]
        if note:
            return str(note).removeprefix("not applicable: ")
    return None


def _evaluation_lines(evaluated: Sequence[VariantRow]) -> list[str]:
    """What the evaluation-time variants are (``--eval-variants``): the same weights, scored with a
    RoPE scaling."""
    if not evaluated:
        return []
    names = ", ".join(f"{row.label} (of {row.evaluation_of})" for row in evaluated)
    return [
        "**Evaluation-time variants** (`--eval-variants`): the `eval.rope_scaling=<name>` variants "
        "are not trained runs but the same trained weights as the variant they name, scored with "
        "that RoPE scaling applied at evaluation time (each run's `extrapolation/<name>/*` figures "
        "as its `extrapolation/*`); they share its seeds, selection and data order, so they pair "
        "by seed, and they are compared only on the `extrapolation/*` figures the scaling changed "
        "(not on `test/*`, which are the trained variant's own): " + names + ". "
        "`runs.csv` marks their rows in `evaluation_of`.",
        "",
    ]


def _metric_table(
    report: Report,
    key: str,
    summaries: list[Summary],
    comparisons: list[Comparison | None],
    with_tuned: bool,
    with_references: bool,
) -> list[str]:
    tuned_head = ["chosen"] if with_tuned and report.protocol.tune else []
    head = [
        "variant",
        *tuned_head,
        "n",
        "diverged",
        "mean ± std",
        "95% CI",
        "Δ vs baseline [95% CI]",
        "p",
        "p (Holm)",
        "verdict",
        "MDE (80%)",
        "runs",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, (row, s, c) in enumerate(zip(report.rows, summaries, comparisons)):
        na = not_applicable(row, key) if s.n == 0 else None
        n_diverged, n_runs = row.diverged
        verdict = _verdict_cells(c, i == report.baseline, 4)
        if row.evaluation_of is not None and c is None and s.n and i != report.baseline:
            verdict[3] = f"not compared: {row.evaluation_of}'s own figure"  # e.g. the unscaled 1x
        cells = [
            row.label,
            *([_chosen(row)] if tuned_head else []),
            str(s.n),
            f"**{n_diverged}/{n_runs}**" if n_diverged else f"0/{n_runs}",
            f"n/a: {na}" if na else s.format(4),
            _ci(s.ci_low, s.ci_high, 4),
            *verdict,
            row.status,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    split = key.split("/")[0]
    if with_references and key.endswith("/loss") and split in ("val", "test"):
        for ref in report.references:
            loss = ref.loss(split)
            if loss is not None:
                cells = [
                    f"*reference: {ref.name} (Kneser-Ney)*",
                    *([""] if tuned_head else []),
                    "–",
                    "–",
                    fixed(loss, 4),
                ] + ["–"] * (len(head) - 4 - len(tuned_head))
                lines.append("| " + " | ".join(cells) + " |")
    return lines


def _secondary_comparison(report: Report, key: str, row_index: int) -> Comparison | None:
    label, base = report.rows[row_index].label, report.rows[report.baseline].label
    return next(
        (
            c
            for c in report.comparisons
            if c.metric == key and c.variant == label and c.reference == base
        ),
        None,
    )


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
    lines: list[str] = [f"# {title}", ""]
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
        + f": {plural(len(report.comparisons), 'comparison')}, {report.m} with a test. "
        + (
            f"{_tests_text(report)}, two-sided, Holm-corrected over all {report.m} at α = "
            f"{report.alpha}; equivalence margin {margin_text} (TOST, Holm-corrected); MDE = the "
            f"smallest |Δ| the comparison's test at α/m = {report.alpha / max(report.m, 1):.3g} "
            f"detects with {POWER:.0%} power given the observed spreads."
            if report.m
            else "No comparison has a test (see the reasons in the table), so nothing is corrected and no "
            "verdict is possible."
        )
        + " How to read each column: docs/studies.md.",
        "",
    ]
    lines += _evaluation_lines(evaluated)
    auto = seeds_plan_line(read_json(Path(roots[0]) / SEEDS_PLAN)) if roots else None
    lines += (
        ([auto, ""] if auto else [])
        + _pairing_lines(report)
        + _seeds_lines(report)
        + _factorial_lines(report)
    )
    verdicts = any(
        counted(row.runs) for row in rows
    )  # False: --stages tune (no verdict runs at all)
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
    errors = list(
        dict.fromkeys(e for row in rows for e in row.errors)
    )  # an evaluation-time variant repeats its parent's
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
    return "\n".join(
        one_line(line) for line in lines
    )  # an override's own newline cannot start a line
