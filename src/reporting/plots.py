"""Plots of ``python -m src.report`` (PNG, matplotlib's Agg backend; no display needed).

* ``loss_vs_tokens.png`` — validation loss against training tokens, one line per variant
  (mean over its verdict runs' seeds) with the seed spread as a band (min–max over seeds), and
  the n-gram references' validation losses as horizontal lines;
* ``tuning_<key>.png`` — the selection metric against each tuned key (log axis for a learning
  rate), one line per variant: mean over seeds per candidate, each seed a dot, the chosen value
  circled;
* ``extrapolation.png`` — perplexity at each multiple of the training length per variant
  (mean, min–max bars); lengths that were not applicable are left out and named in the legend;
* ``<metric>_by_length.png`` — a synthetic task's verdict metric (``test/exact_match``) at each test
  size (``test/exact_match@<size>``, src/objectives/synthetic.py) per variant: mean over the verdict
  seeds, each seed a dot; the smallest size, the training one, is marked; sizes that were not
  applicable are named in the legend;
* ``grad_norms.png`` — per-layer gradient norm at the first logged step per variant, one
  panel per stack (decoder, encoder);
* ``<metric>_vs_<factor>.png`` — each reported metric against a numeric factor with at least
  three values (``model.n_layer`` 2, 6, 12, 24), one line per combination of the other factors:
  mean and 95 % interval over the verdict seeds.

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

from src.files import atomic_path
from src.reporting.table import Reference, VariantRow  # noqa: E402
from src.studies.protocol import as_number  # noqa: E402
from src.studies.runs import finite  # noqa: E402


def _colors(n: int) -> list:
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(n)]


def _legend(ax: Any, n: int) -> None:
    """Inside the axes for a few variants, beside them for many (so no curve is hidden)."""
    if n <= 5:
        ax.legend(fontsize=7)
    else:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _save(fig: Any, path: Path) -> Path:
    """Every report figure is written the same way: tight layout, 120 dpi, closed after."""
    fig.tight_layout()
    with atomic_path(path, suffix=path.suffix, root=path.parent) as tmp:
        fig.savefig(tmp, dpi=120)
    plt.close(fig)
    return path


def _short(label: str, width: int = 90) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def loss_vs_tokens(
    rows: Sequence[VariantRow],
    out: Path,
    metric: str = "val/loss",
    references: Sequence[Reference] = (),
) -> Path | None:
    """Validation loss per variant against tokens seen; band = min–max over seeds; n-gram lines."""
    fig, ax = plt.subplots(figsize=(8 if len(rows) <= 5 else 12, 5))
    drawn = 0
    lows: list[float] = []
    for row, color in zip(rows, _colors(len(rows))):
        curves = [
            (r.tokens_per_step, {p.step: p.value for p in r.val_history})
            for r in row.runs
            if r.val_history and r.tokens_per_step
        ]
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
        # markers where a run has few validations: a line through one point draws nothing
        ax.plot(
            x,
            mean,
            color=color,
            label=f"{_short(row.short)} (n={len(curves)})",
            lw=1.6,
            marker="o" if len(x) <= 12 else None,
            ms=4,
        )
        if len(curves) > 1:
            ax.fill_between(
                x,
                [min(v) for v in per_step],
                [max(v) for v in per_step],
                color=color,
                alpha=0.2,
                lw=0,
            )
        lows += [min(v) for v in per_step]
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    for ref, style in zip(
        [r for r in references if r.val is not None], ("-", "--", "-.", ":", (0, (1, 3)))
    ):
        ax.axhline(ref.val, color="0.35", ls=style, lw=1.0, label=f"{ref.name} (Kneser-Ney, val)")
    ax.set_xlabel("training tokens")
    ax.set_ylabel(f"{metric} (nats/token)")
    ax.set_title(f"{metric} vs tokens (line: mean over seeds; band: min–max)")
    ax.grid(alpha=0.3)
    _legend(ax, len(rows) + len(references))
    return _save(fig, out / "loss_vs_tokens.png")


def _factor(key: str) -> float | None:
    try:
        return float(key.rsplit("@", 1)[1].rstrip("x"))
    except (IndexError, ValueError):
        return None


def extrapolation(
    rows: Sequence[VariantRow], out: Path, prefix: str = "extrapolation/ppl@"
) -> Path | None:
    """Perplexity vs context length (as multiples of the training length) per variant."""
    keys = sorted(
        {k for row in rows for r in row.runs for k in (r.metrics or {}) if k.startswith(prefix)},
        key=lambda k: _factor(k) or 0,
    )
    if not keys:
        return None
    fig, ax = plt.subplots(figsize=(7 if len(rows) <= 5 else 11, 5))
    for row, color in zip(rows, _colors(len(rows))):
        xs, mean, lo, hi, missing = [], [], [], [], []
        for k in keys:
            vals = finite(r.metric(k) for r in row.runs if r.status == "completed")
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
    # a blow-up: log scale keeps the rest readable
    if finite_y and max(finite_y) / min(finite_y) > 10:
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
    return _save(fig, out / "extrapolation.png")


def by_length(
    rows: Sequence[VariantRow], out: Path, metric: str = "test/exact_match"
) -> Path | None:
    """``metric`` against the test size (``<metric>@<size>``) per variant: the mean over the verdict
    runs, each seed a dot. The test sizes start at the training size (src/data/synthetic/base.py),
    marked 1×."""
    sizes = sorted(
        {
            int(k.rsplit("@", 1)[1])
            for row in rows
            for r in row.runs
            for k in (r.metrics or {})
            if k.startswith(metric + "@") and k.rsplit("@", 1)[1].isdigit()
        }
    )
    if len(sizes) < 2:
        return None
    train = sizes[0]
    fig, ax = plt.subplots(figsize=(8 if len(rows) <= 5 else 11, 5))
    drawn = 0
    for i, (row, color) in enumerate(zip(rows, _colors(len(rows)))):
        xs, mean, missing = [], [], []
        runs = [r for r in row.runs if r.status == "completed"]
        # each variant a little sideways: equal values (0, 1) stay visible
        nudge = 2 ** (0.015 * (i - (len(rows) - 1) / 2))
        for n in sizes:
            vals = finite(r.metric(f"{metric}@{n}") for r in runs)
            if not vals:
                if runs:
                    missing.append(str(n))
                continue
            xs.append(n * nudge)
            mean.append(sum(vals) / len(vals))
            ax.scatter([n * nudge] * len(vals), vals, color=color, s=12, alpha=0.5)
        if not xs and not missing:
            continue
        label = f"{_short(row.short)} (n={len(runs)})" + (
            f" (n/a at {', '.join(missing)})" if missing else ""
        )
        ax.plot(xs, mean, color=color, marker="o", lw=1.6, label=label)
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    ax.axvline(train, color="0.5", ls=":", lw=1.0)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([f"{n}\n{n / train:g}×" for n in sizes], fontsize=8)
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    # a fraction: the whole range, so 0 and 1 read as such
    if metric.endswith(("exact_match", "acc")):
        ax.set_ylim(-0.04, 1.04)
    ax.set_xlabel("test size (the training size: 1×)")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} by test size (line: mean over seeds; dots: seeds)")
    ax.grid(alpha=0.3, which="both")
    _legend(ax, drawn)
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in metric.replace("/", "_"))
    return _save(fig, out / f"{safe}_by_length.png")


def grad_norms(rows: Sequence[VariantRow], out: Path, kind: str = "ffn") -> Path | None:
    """Per-layer gradient norms (first recorded step) per variant; one panel per stack. ``kind``:
    ``ffn`` (the FFN weight matrices, the quantity of Xiong et al. 2020, Fig. 3), ``attn`` or
    ``block``."""
    data: dict[str, list[tuple[str, int, list[float]]]] = {}
    for i, row in enumerate(rows):
        per_stack: dict[str, list[list[float]]] = {}
        for r in row.runs:
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
    fig, axes = plt.subplots(
        1, len(stacks), figsize=((7 if len(rows) <= 5 else 11) * len(stacks), 5), squeeze=False
    )
    colors = _colors(len(rows))
    for ax, stack in zip(axes[0], stacks):
        curves: list[
            tuple[str, int, list[float], int]
        ] = []  # variants with identical step-0 norms share a curve
        for label, i, mean in data[stack]:
            same = next((k for k, c in enumerate(curves) if c[2] == mean), None)
            if same is None:
                curves.append((label, i, mean, 0))
            else:
                lab, j, m, n = curves[same]
                curves[same] = (lab, j, m, n + 1)
        for label, i, mean, n_same in curves:
            extra = f" (and {n_same} more with identical norms)" if n_same else ""
            ax.plot(
                range(len(mean)), mean, marker="o", color=colors[i], label=_short(label) + extra
            )
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%.3g"))
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_xlabel(f"{stack} layer (0 = nearest the input)")
        what = {
            "ffn": "FFN weight matrices",
            "attn": "attention weight matrices",
            "block": "whole block",
        }.get(kind, kind)
        ax.set_ylabel(f"gradient norm ({what})")
        ax.set_title(f"{stack}: per-layer gradient norm at step 0 (mean over seeds)")
        ax.grid(alpha=0.3, which="both")
        _legend(ax, len(rows))
    return _save(fig, out / "grad_norms.png")


def tuning(
    rows: Sequence[VariantRow], out: Path, key: str, metric: str = "val/loss"
) -> Path | None:
    """The selection metric against the tuned ``key`` per variant (the best over the other tuned
    keys at each value); dots: single seeds; circle: the chosen value."""
    fig, ax = plt.subplots(figsize=(8 if len(rows) <= 5 else 12, 5))
    drawn, numeric = 0, True
    for row, color in zip(rows, _colors(len(rows))):
        best: dict[str, float] = {}
        dots: list[tuple[str, float]] = []
        for cand in row.tuned.candidates:
            v = cand.values[key]
            if cand.score is not None and math.isfinite(cand.score):
                best[v] = min(best.get(v, math.inf), cand.score)
            dots += [(v, x) for x in finite(r.metric(metric) for r in cand.runs)]
        if not best:
            continue
        numeric &= all(as_number(v) is not None for v in best)
        xs = sorted(best, key=lambda v: as_number(v) if as_number(v) is not None else 0.0)
        pos = (
            (lambda v: as_number(v))
            if numeric
            else (lambda v, xs=xs: float(xs.index(v)) if v in xs else None)
        )
        ax.plot(
            [pos(v) for v in xs],
            [best[v] for v in xs],
            marker="o",
            color=color,
            label=_short(row.short),
            lw=1.4,
        )
        shown = [(pos(v), y) for v, y in dots if pos(v) is not None]
        ax.scatter([x for x, _ in shown], [y for _, y in shown], color=color, s=10, alpha=0.5)
        chosen = (row.tuned.chosen or {}).get(key)
        if chosen in best:
            ax.scatter(
                [pos(chosen)],
                [best[chosen]],
                s=140,
                facecolors="none",
                edgecolors=color,
                linewidths=1.8,
            )
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    values = [as_number(c.values[key]) for row in rows for c in row.tuned.candidates]
    if numeric and all(v is not None and v > 0 for v in values) and max(values) / min(values) >= 3:  # type: ignore[type-var,operator]
        ax.set_xscale("log")
    ax.set_xlabel(key)
    ax.set_ylabel(f"mean {metric} over seeds")
    ax.set_title(f"{metric} vs {key} (dots: seeds; circle: chosen per variant)")
    ax.grid(alpha=0.3, which="both")
    _legend(ax, len(rows))
    return _save(fig, out / f"tuning_{key.replace('/', '.').replace('.', '_')}.png")


def numeric_factors(rows: Sequence[VariantRow], factors: Sequence[str]) -> list[str]:
    """The factors whose values are all numbers, with at least three distinct ones (a trend, not a
    pair)."""
    out = []
    for key in factors:
        vals = {row.variant.values().get(key) for row in rows}
        nums = {as_number(v) for v in vals if v is not None}
        if None not in vals and None not in nums and len(nums) >= 3:
            out.append(key)
    return out


def against_factor(
    rows: Sequence[VariantRow],
    out: Path,
    metric: str,
    factor: str,
    others: Sequence[str],
    summaries: Sequence[Any],
) -> Path | None:
    """``metric`` (mean and 95 % interval over seeds; ``summaries`` in row order) against the
    numeric ``factor``, one line per combination of the ``others`` factors. Log x when the values
    span ≥ 8×."""
    lines: dict[str, list[tuple[float, Any]]] = {}
    for row, s in zip(rows, summaries):
        if s.mean is None:
            continue
        d = row.variant.values()
        name = (
            ", ".join(f"{k.replace('/', '.').split('.')[-1]}={d.get(k)}" for k in others) or metric
        )
        lines.setdefault(name, []).append((float(as_number(d[factor])), s))
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(7 if len(lines) <= 6 else 10, 5))
    colors = _colors(len(lines))
    xs_all = sorted({x for pts in lines.values() for x, _ in pts})
    for i, (name, pts) in enumerate(sorted(lines.items())):
        pts.sort(key=lambda p: p[0])
        x = [p[0] for p in pts]
        y = [p[1].mean for p in pts]
        lo = [p[1].mean - p[1].ci_low if p[1].ci_low is not None else 0.0 for p in pts]
        hi = [p[1].ci_high - p[1].mean if p[1].ci_high is not None else 0.0 for p in pts]
        ax.errorbar(x, y, yerr=[lo, hi], marker="o", capsize=3, color=colors[i], label=_short(name))
    if xs_all[0] > 0 and xs_all[-1] / xs_all[0] >= 8:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.set_xticks(xs_all)
    ax.set_xlabel(factor)
    ax.set_ylabel(metric)
    ax.set_title(f"{metric}\nagainst {factor} (mean, 95% interval over seeds)", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    _legend(ax, len(lines))
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in f"{metric}_vs_{factor}")
    return _save(fig, out / f"{safe}.png")
