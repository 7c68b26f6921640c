"""``scaling_lnd.md`` and ``scaling_lnd.csv``: the L(N, D) fits of src/reporting/scaling_lnd.py.

``scaling_lnd.csv`` is long: one row per number, ``row`` its id (for a claims ledger), ``kind``
one of ``parameter`` (E, A, B, alpha, beta of an arm), ``optimal`` (N_opt, D_opt of an arm at
``compute`` FLOPs) or ``advantage`` (``at_d_min``, ``at_d_max`` and ``change`` of a pair at a
size; the ``change`` row carries the verdict), with ``estimate``, ``ci_low``, ``ci_high`` (95 %
bootstrap; empty without replicates) and the context columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from src.files import atomic_write
from src.reporting.csv_files import write_csv
from src.reporting.scaling_lnd import LndAnalysis
from src.reporting.sections import significant
from src.studies.chinchilla import PARAMS

COLUMNS = (
    "row",
    "kind",
    "arm",
    "versus",
    "size",
    "params",
    "params_versus",
    "tokens_min",
    "tokens_max",
    "compute",
    "quantity",
    "estimate",
    "ci_low",
    "ci_high",
    "verdict",
    "n_boot",
)
SYMBOL = {"E": "E", "A": "A", "B": "B", "alpha": "α", "beta": "β"}


def records(a: LndAnalysis) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for arm, f in a.fits.items():
        n = len(f.replicates)
        for q in PARAMS:
            ci = f.interval(q)
            out.append(
                {
                    "row": f"{q}: {arm}",
                    "kind": "parameter",
                    "arm": arm,
                    "quantity": q,
                    "estimate": getattr(f.law, q),
                    "ci_low": ci and ci[0],
                    "ci_high": ci and ci[1],
                    "n_boot": n,
                }
            )
        for q, (est, lo, hi) in f.optimal(a.compute).items():
            out.append(
                {
                    "row": f"{q}_opt@{a.compute:.4g}: {arm}",
                    "kind": "optimal",
                    "arm": arm,
                    "compute": a.compute,
                    "quantity": f"{q}_opt",
                    "estimate": est,
                    "ci_low": None if n == 0 else lo,
                    "ci_high": None if n == 0 else hi,
                    "n_boot": n,
                }
            )
    for v in a.advantages:
        for q, est in (("at_d_min", v.at_min), ("at_d_max", v.at_max), ("change", v.change)):
            ci = v.ci[q.replace("_d_", "_")]
            out.append(
                {
                    "row": f"advantage {q}: {v.arms[1]} vs {v.arms[0]} @ {v.size}",
                    "kind": "advantage",
                    "arm": v.arms[1],
                    "versus": v.arms[0],
                    "size": v.size,
                    "params": v.params[1],
                    "params_versus": v.params[0],
                    "tokens_min": v.tokens[0],
                    "tokens_max": v.tokens[1],
                    "quantity": q,
                    "estimate": est,
                    "ci_low": ci and ci[0],
                    "ci_high": ci and ci[1],
                    "verdict": v.verdict if q == "change" else None,
                    "n_boot": min(len(a.fits[x].replicates) for x in v.arms),
                }
            )
    return out


def _cell(est: float, ci: tuple[float, float] | None) -> str:
    s = significant(est)
    return s if ci is None else f"{s} [{significant(ci[0])}, {significant(ci[1])}]"


def render(a: LndAnalysis, metric: str, title: str) -> str:
    n_boot = max((len(f.replicates) for f in a.fits.values()), default=0)
    d_axis = ", ".join(f"`{k}`" for k in a.d_keys) or "none (D varies within each variant)"
    lines = [
        f"# {title}",
        "",
        f"Metric: `{metric}`. Fit per arm on each (N, D) point's mean over seeds, "
        "N = parameters, D = tokens_seen: L(N, D) = E + A·N^(−α) + B·D^(−β) (Hoffmann et al. "
        f"2022, approach 3: Huber on log loss). Intervals: 95 % bootstrap over seeds "
        f"({n_boot} replicates). D axis: {d_axis}.",
        "",
        "| arm | (N, D) points | " + " | ".join(SYMBOL[q] for q in PARAMS) + " |",
        "|---|---|" + "---|" * len(PARAMS),
    ]
    for arm, f in a.fits.items():
        cells = [_cell(getattr(f.law, q), f.interval(q)) for q in PARAMS]
        lines.append(f"| {arm} | {len(f.points)} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"## Compute-optimal N and D at C = {significant(a.compute)} FLOPs (C ≈ 6·N·D)",
        "",
        "| arm | N_opt | D_opt | D/N |",
        "|---|---|---|---|",
    ]
    for arm, f in a.fits.items():
        o = f.optimal(a.compute)
        ci = {k: None if not f.replicates else (v[1], v[2]) for k, v in o.items()}
        lines.append(
            f"| {arm} | {_cell(o['N'][0], ci['N'])} | {_cell(o['D'][0], ci['D'])} | "
            f"{significant(o['D'][0] / o['N'][0])} |"
        )
    lines += [
        "",
        "## Does an advantage shrink with D at fixed N?",
        "",
        "Advantage: L_b(N_b, D) − L_a(N_a, D) from the fits, each arm at its own N at that size "
        "(below 0: b lower), at the smallest and largest D both ran. Change: the advantage at "
        "D_max minus at D_min; **shrinks** when its interval lies wholly on the side toward 0, "
        "**grows** when wholly on the other, else no verdict.",
        "",
        "| b vs a | size | N_a; N_b | D_min → D_max | at D_min | at D_max | change | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in a.advantages:
        lines.append(
            f"| {v.arms[1]} vs {v.arms[0]} | {v.size} | {significant(v.params[0])}; "
            f"{significant(v.params[1])} | {significant(v.tokens[0])} → "
            f"{significant(v.tokens[1])} | {_cell(v.at_min, v.ci['at_min'])} | "
            f"{_cell(v.at_max, v.ci['at_max'])} | {_cell(v.change, v.ci['change'])} | "
            f"{v.verdict} |"
        )
    if a.notes:
        lines += ["", "## Notes", "", *[f"* {n}" for n in a.notes]]
    return "\n".join(lines) + "\n"


def write(a: LndAnalysis, out_dir: Path, metric: str, title: str) -> dict[str, Path]:
    """``scaling_lnd.md`` and ``scaling_lnd.csv`` in ``out_dir``."""
    md = out_dir / "scaling_lnd.md"
    atomic_write(md, render(a, metric, title), root=out_dir)
    csv = write_csv(out_dir / "scaling_lnd.csv", records(a), COLUMNS, root=out_dir)
    return {"scaling_lnd.md": md, "scaling_lnd.csv": csv}
