"""Turn a sweep into a side-by-side report: ``python -m src.report <sweep dir> [<dir> ...]``.

Reads every run directory below the given directories (``.hydra/config.yaml`` and
``overrides.yaml``, ``metrics.json``, ``csv/*/metrics.csv``, ``grad_norms.json``,
``extrapolation.json``, ``match_params.json``, evaluations inside the run), groups runs by
their overrides except the seed, and writes to ``--out`` (default: the first directory):

* ``report.md`` — one row per variant: parameters, tokens, final validation loss and
  perplexity (mean ± std over seeds, n), best step, throughput, wall time, diverged/failed
  markers, and whether the difference from the baseline exceeds seed noise (Welch's
  t-test, p-value stated; with one seed it says it cannot tell); extrapolation, matched
  counts and per-layer gradient norms when the runs have them;
* ``report.csv`` (per variant) and ``runs.csv`` (per run);
* ``loss_vs_tokens.png``, ``extrapolation.png``, ``grad_norms.png`` (when there is data).

Examples::

    python -m src.report outputs/studies/positions
    python -m src.report outputs/studies/norm --baseline model.norm_placement=pre,scheduler.warmup_steps=0
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from src.reporting import plots as report_plots
from src.reporting.render import csv_rows, render_markdown, run_records, write_csv
from src.reporting.table import DEFAULT_EXTRA, VariantRow, build_rows, extra_keys, pairwise
from src.reporting.sweep import IGNORED_KEYS, RunRecord, Variant, group_runs, load_runs


@dataclass
class Report:
    runs: list[RunRecord]
    variants: list[Variant]
    rows: list[VariantRow]
    varying: list[str]
    markdown: Path
    csv: Path
    runs_csv: Path
    plots: dict[str, Path | None]


def find_baseline(variants: Sequence[Variant], spec: str | None) -> int:
    """Index of the variant whose overrides include every ``key=value`` of ``spec`` (comma-separated)."""
    if not spec:
        return 0
    wanted = dict(p.split("=", 1) for p in spec.split(",") if "=" in p)
    wanted = {k.lstrip("+"): v for k, v in wanted.items()}
    matches = [i for i, v in enumerate(variants) if all(v.values().get(k) == val for k, val in wanted.items())]
    if matches:  # the one with the fewest other overrides (a follow-up's extra key does not steal the baseline)
        return min(matches, key=lambda i: (len(variants[i].key), i))
    labels = "; ".join(", ".join(f"{k}={x}" for k, x in v.key) for v in variants)
    raise ValueError(f"--baseline {spec!r} matches no variant; variants: {labels}")


def make_report(roots: Sequence[str | Path], out: str | Path | None = None, *, metric: str = "val/loss",
                baseline: str | None = None, alpha: float = 0.05, extra: Sequence[str] = DEFAULT_EXTRA,
                ignore: Sequence[str] = IGNORED_KEYS, title: str | None = None) -> Report:
    """Build the report of the runs under ``roots``; write it to ``out`` (default ``roots[0]``)."""
    runs = load_runs(roots)
    variants, varying, shared = group_runs(runs, ignore)
    base = find_baseline(variants, baseline)
    extras = extra_keys(runs, extra)
    rows = build_rows(variants, varying, metric=metric, baseline=base, alpha=alpha, extra=extras)
    out_dir = Path(out or roots[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = {
        "validation loss vs tokens": report_plots.loss_vs_tokens(rows, out_dir, metric),
        "length extrapolation": report_plots.extrapolation(rows, out_dir),
        "per-layer gradient norms": report_plots.grad_norms(rows, out_dir),
    }
    text = render_markdown(title=title or f"Sweep report: {', '.join(Path(r).name for r in roots)}",
                           roots=[str(r) for r in roots], runs=runs, rows=rows, varying=varying, shared=shared,
                           baseline=base, metric=metric, alpha=alpha, extra=extras,
                           pairs=pairwise(rows, metric, alpha, varying), plots=plots)
    md = out_dir / "report.md"
    md.write_text(text + "\n")
    table = write_csv(out_dir / "report.csv", csv_rows(rows, varying, extras))
    per_run = write_csv(out_dir / "runs.csv", run_records(runs, metric))
    return Report(runs, variants, rows, varying, md, table, per_run, plots)


def main(argv: Sequence[str] | None = None) -> Report:
    p = argparse.ArgumentParser(prog="python -m src.report", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="+", help="sweep directories (hydra.sweep.dir) or run directories")
    p.add_argument("--out", default=None, help="where to write report.md/.csv and the plots (default: the first dir)")
    p.add_argument("--metric", default="val/loss", help="metrics.json key compared across variants (default val/loss)")
    p.add_argument("--baseline", default=None, help="key=value[,key=value] picking the baseline variant (default: first)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level of the test (default 0.05)")
    p.add_argument("--extra", nargs="*", default=list(DEFAULT_EXTRA), help="metrics.json keys/patterns to add as columns")
    p.add_argument("--ignore", nargs="*", default=list(IGNORED_KEYS),
                   help="override keys (a trailing '.' = prefix) that do not define a variant (default: seed, hydra., …)")
    p.add_argument("--title", default=None)
    args = p.parse_args(argv)
    report = make_report(args.dirs, args.out, metric=args.metric, baseline=args.baseline, alpha=args.alpha,
                         extra=args.extra, ignore=args.ignore, title=args.title)
    print(report.markdown.read_text())
    print(f"wrote {report.markdown}, {report.csv}, {report.runs_csv}"
          + "".join(f", {p}" for p in report.plots.values() if p is not None))
    return report


if __name__ == "__main__":
    main()
