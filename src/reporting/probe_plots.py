"""Probe curves over training in ``python -m src.report`` (the probe callback's figures,
docs/probes.md).

For each probe one PNG, ``probe_<name>.png``, with one line per variant: the mean over its runs
(seeds) at each probed step, and the min–max over seeds as a band. A per-layer probe
(``attn_entropy``, ``sink_mass``, ``lens_loss``) gets a panel per layer. The induction figure names
each variant's induction steps in its legend, a run that never reached the threshold as "not
reached". The curves are read from the runs' ``csv/version_*/metrics.csv`` (the CSV logger), where
the callback logs each figure at the optimizer step it was taken."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

from src.reporting.plots import _colors, _legend, _save, _short, plt
from src.reporting.table import VariantRow
from src.studies.runs import RunRecord, csv_log_rows

#: the probes drawn, in order; ``@L<l>`` marks a per-layer figure (one panel per layer)
PROBES = ("induction_max", "prev_token_max", "icl_score", "attn_entropy", "sink_mass", "lens_loss")
INDUCTION_STEP = "probe/induction_step"
_LAYER = re.compile(r"^probe/(\w+)@(.*)$")


def probe_history(run: RunRecord) -> dict[str, dict[int, float]]:
    """``{figure: {step: value}}`` of every ``probe/...`` column of the run's CSV logs (a resumed
    run's later versions win)."""
    out: dict[str, dict[int, float]] = {}
    for _, _, step, row in csv_log_rows(run.path):
        for key, cell in row.items():
            if key and key.startswith("probe/") and cell not in (None, ""):
                try:
                    out.setdefault(key, {})[step] = float(cell)
                except ValueError:
                    continue
    return out


def induction_note(run: RunRecord) -> str:
    """The run's induction step, or "not reached" (metrics.json's run-level value)."""
    metrics = run.metrics or {}
    if INDUCTION_STEP not in metrics:
        return "n/a"
    step = metrics[INDUCTION_STEP]
    return "not reached" if step is None else f"{int(step)}"


def _band(
    curves: list[dict[int, float]],
) -> tuple[list[int], list[float], list[float], list[float]]:
    steps = sorted(set.intersection(*(set(c) for c in curves)))
    steps = [s for s in steps if all(math.isfinite(c[s]) for c in curves)]
    vals = [[c[s] for c in curves] for s in steps]
    return steps, [sum(v) / len(v) for v in vals], [min(v) for v in vals], [max(v) for v in vals]


def probe_curves(rows: Sequence[VariantRow], out: Path) -> dict[str, Path | None]:
    """One figure per probe found in the runs' logs: ``{title: path}`` (an empty dict when no run
    probed)."""
    histories = [[probe_history(r) for r in row.runs] for row in rows]
    keys = {k for per_row in histories for h in per_row for k in h}
    figures: dict[str, Path | None] = {}
    for probe in PROBES:
        panels = sorted(
            {m.group(2) for k in keys if (m := _LAYER.match(k)) and m.group(1) == probe},
            key=lambda p: (p.count("."), p),
        )  # L0, L1 …, then enc.L0 …, cross.L0 …
        names = [f"probe/{probe}@{p}" for p in panels] if panels else [f"probe/{probe}"]
        names = [n for n in names if n in keys]
        if not names:
            continue
        width = 7 if len(rows) <= 5 else 10
        fig, axes = plt.subplots(
            1, len(names), figsize=(min(width * len(names), 28), 4.5), squeeze=False
        )
        for ax, name in zip(axes[0], names):
            for row, per_row, color in zip(rows, histories, _colors(len(rows))):
                curves = [h[name] for h in per_row if h.get(name)]
                if not curves:
                    continue
                steps, mean, lo, hi = _band(curves)
                label = f"{_short(row.short, 60)} (n={len(curves)})"
                if probe == "induction_max":
                    label += f"; induction step: {', '.join(induction_note(r) for r in row.runs)}"
                ax.plot(
                    steps,
                    mean,
                    color=color,
                    lw=1.6,
                    label=label,
                    marker="o" if len(steps) <= 12 else None,
                    ms=4,
                )
                if len(curves) > 1:
                    ax.fill_between(steps, lo, hi, color=color, alpha=0.2, lw=0)
            if probe == "induction_max":
                thresholds = {
                    ((r.config.get("callbacks") or {}).get("probes") or {}).get(
                        "induction_threshold"
                    )
                    for row in rows
                    for r in row.runs
                }
                if len(thresholds) == 1 and isinstance(t := thresholds.pop(), (int, float)):
                    ax.axhline(t, color="0.4", ls="--", lw=1.0, label=f"induction_threshold={t:g}")
            ax.set_xlabel("optimizer step")
            ax.set_ylabel(name)
            ax.set_title(name.removeprefix("probe/"))
            ax.grid(alpha=0.3)
            _legend(ax, len(rows))
        fig.suptitle(
            f"probe/{probe} over training (line: mean over seeds; band: min–max)", fontsize=10
        )
        figures[f"probe/{probe} over training"] = _save(fig, out / f"probe_{probe}.png")
    return figures
