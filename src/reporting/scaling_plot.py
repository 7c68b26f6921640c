"""``scaling.png``: loss against parameters on log-log axes, one colour per arm (PNG, Agg backend).

Each seed is a small dot, the mean over seeds at each size a marker with the min–max bar, the fitted
``E + A·N^(−α)`` a line over the measured range (dashed beyond it, out to a crossing when one lies
within ×100 of the range), and each crossing a dotted vertical line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402

from src.files import atomic_path  # noqa: E402
from src.studies.power_law import ScalingFit  # noqa: E402


def plot_scaling(
    points: Sequence[Any],
    fits: Mapping[str, ScalingFit],
    crossings: Sequence[Any],
    out: Path,
    metric: str,
) -> Path | None:
    """``points``: objects with ``arm``, ``params``, ``loss``; ``crossings``: with ``arms`` and
    ``at``."""
    if not points:
        return None
    arms = list(dict.fromkeys([*fits, *(p.arm for p in points)]))
    lo, hi = min(p.params for p in points), max(p.params for p in points)
    far = [n for c in crossings for n in c.at]
    x_lo, x_hi = min([lo / 1.5, *far]), max([hi * 1.5, *far])
    fig, ax = plt.subplots(figsize=(8, 5))
    cmap = plt.get_cmap("tab10")
    for i, arm in enumerate(arms):
        color = cmap(i % cmap.N)
        mine = [p for p in points if p.arm == arm]
        ax.scatter([p.params for p in mine], [p.loss for p in mine], s=8, color=color, alpha=0.4)
        sizes = sorted({p.params for p in mine})
        by = [[p.loss for p in mine if p.params == n] for n in sizes]
        means = np.array([np.mean(v) for v in by])
        err = np.array(
            [[m - min(v) for m, v in zip(means, by)], [max(v) - m for m, v in zip(means, by)]]
        )
        fit = fits.get(arm)
        label = (
            arm
            if fit is None
            else f"{arm}: {fit.law.E:.3g} + {fit.law.A:.3g}·N^-{fit.law.alpha:.3g}"
        )
        ax.errorbar(sizes, means, yerr=err, fmt="o", color=color, capsize=3, label=label)
        if fit is not None:
            inside = np.geomspace(lo, hi, 100)
            ax.plot(inside, fit.law(inside), color=color)
            for a, b in ((x_lo, lo), (hi, x_hi)):
                if b > a:
                    xs = np.geomspace(a, b, 50)
                    ax.plot(xs, fit.law(xs), color=color, linestyle="--", linewidth=0.8)
    for c in crossings:
        for n in c.at:
            ax.axvline(n, color="grey", linestyle=":", linewidth=1)
            ax.annotate(
                f"{c.arms[0]} = {c.arms[1]}\nN≈{n:.3g}", (n, ax.get_ylim()[1]), fontsize=7, va="top"
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.yaxis,):  # losses span well under a decade: plain tick labels
        axis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%.2f"))
        axis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%.2f"))
    ax.set_xlim(x_lo, x_hi)
    ax.set_xlabel("parameters N")
    ax.set_ylabel(metric)
    ax.set_title("loss vs parameters (fits: solid in the measured range, dashed beyond)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(out, suffix=Path(out).suffix, root=Path(out).parent) as tmp:
        fig.savefig(tmp, dpi=120)
    plt.close(fig)
    return out
