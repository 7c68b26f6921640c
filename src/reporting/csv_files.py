"""The report's CSV files, written next to ``report.md``:

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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from src.files import atomic_path
from src.provenance import FIELDS as PROVENANCE_FIELDS
from src.reporting.table import Report
from src.studies.outcomes import run_outcome
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
            # its training is its parent's row: summing the column counts it once
            if row.evaluation_of is not None:
                rec.update(train_flops=None, wall_time_s=None)
            recs.append(rec)
    return recs


def comparison_records(report: Report) -> list[dict[str, Any]]:
    return [
        {
            "row": c.row,
            "family": c.family,
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
            "test_why": c.test_why,
            "p_floor": c.p_floor,
            "exact": c.exact if c.p_floor is not None else None,
            "expect": c.expect,
            "interaction": c.interaction,
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
