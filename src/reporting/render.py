"""Write the report: ``report.md`` (tables, the statistical test in words, plots) and
``report.csv`` (one row per variant) plus ``runs.csv`` (one row per run)."""
from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from src.reporting.stats import TEST_IMPLEMENTATION, TEST_NAME, Summary
from src.reporting.table import BLOWUP, PairResult, VariantRow, run_outcome
from src.reporting.sweep import RunRecord


def _num(x: float | None, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{x:.{digits}f}"


def _int(x: float | None) -> str:
    return "" if x is None else f"{int(round(x)):,}"


def _pm(s: Summary, digits: int = 3) -> str:
    return s.format(digits)


def _p(c: Any) -> str:
    if c is None or c.test is None:
        return "–"
    return f"{c.test.p:.3g}"


def _delta(c: Any, digits: int = 3) -> str:
    if c is None or c.delta is None:
        return "–"
    return f"{c.delta:+.{digits}f}"


def _extrapolation_note(row: VariantRow, key: str) -> str | None:
    """Why ``extrapolation/ppl@<f>x`` is missing for this variant (from extrapolation.json or metrics.json)."""
    if not key.startswith("extrapolation/") or "@" not in key:
        return None
    tag = key.split("@")[-1]
    for r in row.variant.runs:
        note = (r.metrics or {}).get(f"extrapolation/note@{tag}")
        for x in (r.extrapolation or {}).get("lengths", []):
            f = float(x.get("factor", 0))
            if (f"{int(f)}x" if f.is_integer() else f"{f:g}x") == tag and x.get("note"):
                note = note or x["note"]
        if note:
            return str(note).removeprefix("not applicable: ")
    return None


def csv_rows(rows: Sequence[VariantRow], varying: Sequence[str], extra: Sequence[str]) -> list[dict[str, Any]]:
    out = []
    for i, row in enumerate(rows):
        d = row.variant.values()
        rec: dict[str, Any] = {"variant": row.label, **{k: d.get(k, "") for k in varying}}
        c = row.comparison
        rec.update({
            "n_runs": len(row.variant.runs), "n_seeds": row.loss.n, "seeds": " ".join(map(str, row.variant.seeds)),
            "status": row.status,
            "params": row.params.mean, "reference_params": row.reference_params,
            "tokens_seen": row.tokens.mean,
            "val_loss_mean": row.loss.mean, "val_loss_std": row.loss.std,
            "val_ppl_mean": row.ppl.mean, "val_ppl_std": row.ppl.std,
            "val_loss_best_mean": row.best_loss.mean, "val_loss_best_std": row.best_loss.std,
            "best_step": " ".join("" if s is None else str(s) for s in row.best_steps),
            "throughput_tokens_per_s_mean": row.throughput.mean, "wall_time_s_mean": row.wall.mean,
            "delta_vs_baseline": c.delta if c else None, "p_value": c.test.p if c and c.test else None,
            "verdict": "baseline" if c is None and i == 0 else (c.verdict if c else ""),
        })
        for k in extra:
            rec[f"{k}_mean"] = row.extra[k].mean
            rec[f"{k}_std"] = row.extra[k].std
        out.append(rec)
    return out


def write_csv(path: Path, records: Sequence[dict[str, Any]]) -> Path:
    keys: list[str] = []
    for r in records:
        keys += [k for k in r if k not in keys]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in records:
            w.writerow({k: ("" if v is None else v) for k, v in r.items()})
    return path


def run_records(runs: Sequence[RunRecord], metric: str) -> list[dict[str, Any]]:
    recs = []
    for r in sorted(runs, key=lambda r: (r.job_num, str(r.path))):
        m = r.metrics or {}
        recs.append({"run_dir": str(r.path), "job_num": r.job_num, "seed": r.seed,
                     "overrides": " ".join(f"{k}={v}" for k, v in r.overrides.items()),
                     "status": r.status, "outcome": run_outcome(r, metric), "params": m.get("params"),
                     "tokens_seen": m.get("tokens_seen"), metric: m.get(metric), f"{metric}_best": m.get(f"{metric}_best"),
                     "best_step": m.get("best_step"), "global_step": m.get("global_step"),
                     "throughput_tokens_per_s": m.get("throughput_tokens_per_s"), "wall_time_s": m.get("wall_time_s"),
                     "error": m.get("error")})
    return recs


def render_markdown(*, title: str, roots: Sequence[str], runs: Sequence[RunRecord], rows: Sequence[VariantRow],
                    varying: Sequence[str], shared: dict[str, str], baseline: int, metric: str, alpha: float,
                    extra: Sequence[str], pairs: Sequence[PairResult], plots: dict[str, Path | None]) -> str:
    lines: list[str] = [f"# {title}", ""]
    n_seeds = sorted({row.loss.n for row in rows})
    total_wall = sum(r.metric("wall_time_s") or 0.0 for r in runs)
    lines += [
        f"{len(runs)} runs in {len(rows)} variants from {', '.join(f'`{r}`' for r in roots)}; "
        f"seeds with a final {metric} per variant: {', '.join(map(str, n_seeds))}; "
        f"total wall time of the runs {total_wall / 60:.1f} min.",
        "",
    ]
    if shared:
        lines += ["Shared overrides: " + ", ".join(f"`{k}={v}`" for k, v in shared.items()), ""]
    base = rows[baseline].label if rows else "–"
    lines += [f"Baseline for the comparisons: **{base}**.", ""]

    head = ["variant", "params", "tokens", f"final {metric}", "ppl", "seeds", "best step", "tok/s", "wall s", "status",
            "Δ vs baseline", "p", "verdict"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, row in enumerate(rows):
        c = row.comparison
        params = _int(row.params.mean)
        if row.reference_params:
            params += f" (ref {row.reference_params:,})"
        cells = [row.label, params, _int(row.tokens.mean), _pm(row.loss), _pm(row.ppl, 2), str(row.loss.n),
                 "/".join("–" if s is None else str(s) for s in row.best_steps) or "–",
                 _int(row.throughput.mean), _num(row.wall.mean, 0), row.status,
                 "–" if i == baseline else _delta(c), "–" if i == baseline else _p(c),
                 "baseline" if i == baseline else (c.verdict if c else "–")]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")

    lines += [
        "## Which differences exceed seed noise",
        "",
        f"Test: {TEST_NAME} on the final {metric} of each seed, each variant against the baseline, "
        f"α = {alpha}; {TEST_IMPLEMENTATION}. Values are mean ± sample standard deviation over seeds. "
        "\"differs\" means p < α; \"within seed noise\" means it does not; with one seed there is no spread and the "
        "report says it cannot tell. With 2 seeds per variant the test has about 1–2 degrees of freedom, so only "
        "differences several times the seed spread reach p < α; no correction for multiple comparisons is applied.",
        "",
    ]
    sig = [p for p in pairs if p.comparison.significant]
    if len(rows) > 2:
        if sig:
            lines += ["Every pair of variants that differ in one setting only, with p < α:", ""]
            lines += [f"- {p.b} vs {p.a}: Δ = {p.comparison.delta:+.3f}, p = {p.comparison.test.p:.3g}"  # type: ignore[union-attr]
                      for p in sig]
        else:
            lines += [f"No pair of variants that differ in one setting only differs at p < {alpha}."]
        lines.append("")

    if extra:
        lines += ["## Other metrics (mean ± std over seeds)", ""]
        lines += ["| variant | " + " | ".join(extra) + " |", "|---|" + "---|" * len(extra)]
        notes: dict[str, str] = {}
        for row in rows:
            cells = []
            for k in extra:
                note = _extrapolation_note(row, k)
                if note and row.extra[k].mean is None:
                    notes[f"{row.label}, {k.split('@')[-1]}"] = note
                    cells.append("n/a")
                else:
                    cells.append(_pm(row.extra[k]))
            lines.append(f"| {row.label} | " + " | ".join(cells) + " |")
        if notes:
            lines += [""] + [f"- n/a ({where}): {note}" for where, note in notes.items()]
        lines.append("")

    matched = [row for row in rows if row.reference_params]
    if matched:
        lines += ["## Matched parameter counts", "",
                  "| variant | reference | reference params | params | difference | solved |", "|---|---|---|---|---|---|"]
        for row in matched:
            m = next(r.match for r in row.variant.runs if r.match)
            lines.append(f"| {row.label} | `{m.get('reference')}` | {m['reference_params']:,} | {m['params']:,} | "
                         f"{100 * m['rel_error']:+.2f}% | {m.get('before')} → {m.get('solved')} |")
        lines.append("")

    grad_rows = [(row, [r.grad_norms for r in row.variant.runs if r.grad_norms]) for row in rows]
    grad_rows = [(row, g) for row, g in grad_rows if g]
    if grad_rows:
        lines += ["## Per-layer gradient norms at step 0", "",
                  "Mean over seeds, layer 0 nearest the input; FFN = the FFN weight matrices (Xiong et al. 2020, "
                  "Fig. 3), block = all the block's parameters.", ""]
        for row, gs in grad_rows:
            step = min(gs[0], key=int)
            for stack in sorted(gs[0][step]):
                parts = []
                for kind in ("ffn", "block"):
                    per_layer = [g[step][stack][kind] for g in gs if step in g and stack in g[step]]
                    n = min(len(x) for x in per_layer)
                    mean = [sum(x[j] for x in per_layer) / len(per_layer) for j in range(n)]
                    ratio = mean[-1] / mean[0] if mean and mean[0] > 0 else float("nan")
                    parts.append(f"{kind}: " + ", ".join(f"{v:.3g}" for v in mean) + f" (last/first {ratio:.2f})")
                lines.append(f"- {row.label} ({stack}) — " + "; ".join(parts))
        lines.append("")

    lines += ["## Plots", ""]
    for name, path in plots.items():
        if path is not None:
            lines += [f"![{name}]({path.name})", ""]
    errors = [e for row in rows for e in row.errors]
    lines += [
        "## Runs", "",
        f"Outcome per run: ok; diverged (non-finite loss or a NaN/inf stop, final loss above the first training loss, "
        f"or above {BLOWUP}× the run's best); failed (error below); incomplete (no metrics.json: interrupted or running). "
        "Per-run figures are in `runs.csv`.",
        "",
    ]
    if errors:
        lines += ["Errors:", ""] + [f"- {e}" for e in errors] + [""]
    return "\n".join(lines)
