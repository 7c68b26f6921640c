"""The sections of ``report.md`` (assembled by ``src.reporting.render``): number formatting, the
verdict tables, and the paragraphs on scored weights, evaluation-time variants and provenance (the
families, tests, pairing and seeds: ``src.reporting.family_sections``)."""

from __future__ import annotations

import math
import unicodedata
from collections import Counter
from collections.abc import Sequence

import numpy as np

from src.provenance import FIELDS as PROVENANCE_FIELDS
from src.reporting.comparisons import Comparison
from src.reporting.stats import Summary
from src.reporting.table import Report, VariantRow, counted
from src.studies.protocol import compared_factor


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


def provenance_lines(report: Report) -> list[str]:
    """What code, libraries and devices the verdict runs came from (metrics.json's ``provenance``),
    and a warning when they differ within the study: a comparison across commits or versions is not
    one factor."""
    # trained runs, each once
    runs = [r for row in report.rows if row.evaluation_of is None for r in row.runs]
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


def _scored_lines(report: Report) -> list[str]:
    """Which weights the verdict metric scored in the verdict runs: the best by validation, or the
    final ones, at which step."""
    seen: Counter = Counter()
    for row in report.rows:
        # an evaluation-time variant: its parent's
        for r in counted(row.runs) if row.evaluation_of is None else ():
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
