"""Plots of ``python -m src.report`` (PNG, matplotlib's Agg backend; no display needed).

* ``loss_vs_tokens.png`` — validation loss against training tokens, one line per variant
  (mean over seeds) with the seed spread as a band (min–max over seeds);
* ``extrapolation.png`` — perplexity at each multiple of the training length per variant
  (mean, min–max bars); lengths that were not applicable are left out and named in the legend;
* ``grad_norms.png`` — per-layer gradient norm at the first logged step per variant, one
  panel per stack (decoder, encoder).

Each function returns the file written, or None when no run has the data.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

from src.reporting.table import VariantRow  # noqa: E402
from src.reporting.sweep import finite  # noqa: E402


def _colors(n: int) -> list:
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(n)]


def _legend(ax: Any, n: int) -> None:
    """Inside the axes for a few variants, beside them for many (so no curve is hidden)."""
    if n <= 5:
        ax.legend(fontsize=7)
    else:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _short(label: str, width: int = 90) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def loss_vs_tokens(rows: Sequence[VariantRow], out: Path, metric: str = "val/loss") -> Path | None:
    """Validation loss per variant against tokens seen; band = min–max over seeds."""
    fig, ax = plt.subplots(figsize=(8 if len(rows) <= 5 else 12, 5))
    drawn = 0
    lows: list[float] = []
    for row, color in zip(rows, _colors(len(rows))):
        curves = [(r.tokens_per_step, {p.step: p.value for p in r.val_history}) for r in row.variant.runs
                  if r.val_history and r.tokens_per_step]
        if not curves:
            continue
        steps = sorted(set.intersection(*(set(c) for _, c in curves)))
        steps = [s for s in steps if all(math.isfinite(c[s]) for _, c in curves)]
        if not steps:
            continue
        tps = curves[0][0]
        x = [s * tps for s in steps]
        per_step = [[c[s] for _, c in curves] for s in steps]
        mean = [sum(v) / len(v) for v in per_step]
        ax.plot(x, mean, color=color, label=f"{_short(row.short)} (n={len(curves)})", lw=1.6)
        if len(curves) > 1:
            ax.fill_between(x, [min(v) for v in per_step], [max(v) for v in per_step], color=color, alpha=0.2, lw=0)
        lows += [min(v) for v in per_step]
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xlabel("training tokens")
    ax.set_ylabel(f"{metric} (nats/token)")
    ax.set_title(f"{metric} vs tokens (line: mean over seeds; band: min–max)")
    ax.grid(alpha=0.3)
    _legend(ax, len(rows))
    path = out / "loss_vs_tokens.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _factor(key: str) -> float | None:
    try:
        return float(key.rsplit("@", 1)[1].rstrip("x"))
    except (IndexError, ValueError):
        return None


def extrapolation(rows: Sequence[VariantRow], out: Path, prefix: str = "extrapolation/ppl@") -> Path | None:
    """Perplexity vs context length (as multiples of the training length) per variant."""
    keys = sorted({k for row in rows for r in row.variant.runs for k in (r.metrics or {}) if k.startswith(prefix)},
                  key=lambda k: _factor(k) or 0)
    if not keys:
        return None
    fig, ax = plt.subplots(figsize=(7 if len(rows) <= 5 else 11, 5))
    for row, color in zip(rows, _colors(len(rows))):
        xs, mean, lo, hi, missing = [], [], [], [], []
        for k in keys:
            vals = finite(r.metric(k) for r in row.variant.runs if r.status == "completed")
            f = _factor(k)
            if f is None:
                continue
            if not vals:
                missing.append(f"{f:g}x")
                continue
            m = sum(vals) / len(vals)
            xs.append(f)
            mean.append(m)
            lo.append(m - min(vals))
            hi.append(max(vals) - m)
        if not xs and not missing:
            continue
        label = _short(row.short) + (f" (n/a at {', '.join(missing)})" if missing else "")
        if xs:
            ax.errorbar(xs, mean, yerr=[lo, hi], color=color, marker="o", capsize=3, label=label)
        else:
            ax.plot([], [], color=color, label=label)
    ax.set_xscale("log", base=2)
    finite_y = [y for line in ax.get_lines() for y in line.get_ydata() if y > 0]
    if finite_y and max(finite_y) / min(finite_y) > 10:  # a blow-up: log scale keeps the rest readable
        ax.set_yscale("log")
    ax.set_xticks([_factor(k) for k in keys if _factor(k)])
    ax.set_xticklabels([f"{_factor(k):g}×" for k in keys if _factor(k)])
    ax.set_xlabel("evaluation context / training length")
    ax.set_ylabel("validation perplexity" + (" (log scale)" if ax.get_yscale() == "log" else ""))
    ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%.3g"))
    ax.set_title("length extrapolation (bars: min–max over seeds)")
    ax.grid(alpha=0.3, which="both")
    _legend(ax, len(rows))
    path = out / "extrapolation.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def grad_norms(rows: Sequence[VariantRow], out: Path, kind: str = "ffn") -> Path | None:
    """Per-layer gradient norms (first recorded step) per variant; one panel per stack. ``kind``:
    ``ffn`` (the FFN weight matrices, the quantity of Xiong et al. 2020, Fig. 3), ``attn`` or ``block``."""
    data: dict[str, list[tuple[str, int, list[float]]]] = {}
    for i, row in enumerate(rows):
        per_stack: dict[str, list[list[float]]] = {}
        for r in row.variant.runs:
            if not r.grad_norms:
                continue
            step = min(r.grad_norms, key=lambda s: int(s))
            for stack, norms in r.grad_norms[step].items():
                per_stack.setdefault(stack, []).append(norms.get(kind, []))
        for stack, lists in per_stack.items():
            n = min(len(x) for x in lists)
            mean = [sum(x[j] for x in lists) / len(lists) for j in range(n)]
            data.setdefault(stack, []).append((row.short, i, mean))
    if not data:
        return None
    stacks = sorted(data)
    fig, axes = plt.subplots(1, len(stacks), figsize=((7 if len(rows) <= 5 else 11) * len(stacks), 5), squeeze=False)
    colors = _colors(len(rows))
    for ax, stack in zip(axes[0], stacks):
        curves: list[tuple[str, int, list[float], int]] = []  # variants with identical step-0 norms share a curve
        for label, i, mean in data[stack]:
            same = next((k for k, c in enumerate(curves) if c[2] == mean), None)
            if same is None:
                curves.append((label, i, mean, 0))
            else:
                lab, j, m, n = curves[same]
                curves[same] = (lab, j, m, n + 1)
        for label, i, mean, n_same in curves:
            extra = f" (and {n_same} more with identical norms)" if n_same else ""
            ax.plot(range(len(mean)), mean, marker="o", color=colors[i], label=_short(label) + extra)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%.3g"))
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_xlabel(f"{stack} layer (0 = nearest the input)")
        what = {"ffn": "FFN weight matrices", "attn": "attention weight matrices", "block": "whole block"}.get(kind, kind)
        ax.set_ylabel(f"gradient norm ({what})")
        ax.set_title(f"{stack}: per-layer gradient norm at step 0 (mean over seeds)")
        ax.grid(alpha=0.3, which="both")
        _legend(ax, len(rows))
    path = out / "grad_norms.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
