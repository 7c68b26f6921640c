"""A saturating power law in model size, ``L(N) = E + A·N^(−α)`` (Kaplan et al. 2020, Eq. 1.1 with
an irreducible term as in Hoffmann et al. 2022, Eq. 2), fitted with ``scipy.optimize.curve_fit``;
α's interval by a bootstrap over seeds; where two fitted curves cross.

* **Fit.** On one loss per size (the mean over that size's seeds: every size weighs the same), in
  ``x = N / N_ref`` (``N_ref`` the geometric mean of the sizes) so the three parameters are of order
  one; ``E ≥ 0``, ``A ≥ 0``, ``0 < α ≤ 5``. The start point: for each α on a log grid the model is
  linear in (E, A), solved by least squares; the best α of the grid starts ``curve_fit``. Three
  parameters need at least three distinct sizes (with three the curve passes through the points).
* **Bootstrap.** Each replicate draws, for every size independently, that size's seeds with
  replacement (seeds are not paired across sizes), takes the mean and refits; the interval is the
  2.5th–97.5th percentile of the replicates (a replicate whose fit fails is counted and left out).
* **Crossings.** The sizes where ``f(N) = g(N)``: sign changes of ``f − g`` on a log grid over the
  range asked, each refined with ``scipy.optimize.brentq``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import OptimizeWarning, brentq, curve_fit

ALPHA_GRID = np.geomspace(0.02, 5.0, 60)


class PowerLawError(ValueError):
    """Points a power law cannot be fitted to; the message says what is missing. Kept apart from
    ``src.errors``' types because ``src.reporting.scaling`` catches exactly this to note "no fit"
    for an arm."""


@dataclass(frozen=True)
class PowerLaw:
    """``L(N) = E + A·N^(−α)`` in the units the points were given in (N in parameters)."""

    E: float
    A: float
    alpha: float

    def __call__(self, n: float | np.ndarray) -> float | np.ndarray:
        return self.E + self.A * np.power(np.asarray(n, dtype=float), -self.alpha)


def _model(x: np.ndarray, e: float, a: float, alpha: float) -> np.ndarray:
    return e + a * np.power(x, -alpha)


def _start(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """(E, a, α) of the best α on ALPHA_GRID with (E, a) by least squares, clipped to E, a ≥ 0."""
    z = np.power(x[None, :], -ALPHA_GRID[:, None])  # (grid, sizes): N^-α per candidate α
    zc = z - z.mean(axis=1, keepdims=True)
    a = np.maximum((zc * (y - y.mean())).sum(axis=1) / (zc**2).sum(axis=1), 1e-12)  # slope per α
    e = np.maximum(y.mean() - a * z.mean(axis=1), 0.0)
    sse = (((e[:, None] + a[:, None] * z) - y) ** 2).sum(axis=1)
    i = int(np.argmin(sse))
    return float(e[i]), float(a[i]), float(ALPHA_GRID[i])


def fit_power_law(n: Sequence[float], loss: Sequence[float]) -> PowerLaw:
    """The least-squares ``E + A·N^(−α)`` through (N, loss) points (one per size; module
    docstring)."""
    x_raw, y = np.asarray(n, dtype=float), np.asarray(loss, dtype=float)
    if (
        x_raw.shape != y.shape
        or not np.all(np.isfinite(x_raw))
        or not np.all(np.isfinite(y))
        or np.any(x_raw <= 0)
    ):
        raise PowerLawError(
            f"a power law needs positive sizes and finite losses of equal length; got {list(n)}, "
            f"{list(loss)}"
        )
    if len(np.unique(x_raw)) < 3:
        raise PowerLawError(
            f"L(N) = E + A·N^-α has 3 parameters: it needs at least 3 distinct sizes, got "
            f"{sorted(set(x_raw.tolist()))}; add sizes to the sweep"
        )
    n_ref = float(np.exp(np.mean(np.log(x_raw))))
    x = x_raw / n_ref
    p0 = _start(x, y)
    with warnings.catch_warnings():
        # a 3-point fit has no covariance: we do not use it
        warnings.simplefilter("ignore", OptimizeWarning)
        (e, a, alpha), _ = curve_fit(
            _model,
            x,
            y,
            p0=p0,
            bounds=([0.0, 0.0, 1e-6], [np.inf, np.inf, 5.0]),
            method="trf",
            maxfev=20000,
        )
    return PowerLaw(E=float(e), A=float(a) * n_ref ** float(alpha), alpha=float(alpha))


@dataclass
class ScalingFit:
    """One curve's fit on the per-size means, and its bootstrap over seeds."""

    law: PowerLaw
    sizes: list[float]  # N per size, ascending
    means: list[float]  # mean loss per size
    replicates: list[PowerLaw] = field(default_factory=list)
    failed: int = 0  # bootstrap replicates whose fit failed (left out)
    rmse: float = 0.0  # of the fit on the means

    def interval(self, name: str, level: float = 0.95) -> tuple[float, float] | None:
        """Percentile interval of ``E``, ``A`` or ``alpha`` over the replicates (None without
        any)."""
        if not self.replicates:
            return None
        values = np.array([getattr(r, name) for r in self.replicates])
        lo, hi = np.percentile(values, [50 * (1 - level), 50 * (1 + level)])
        return float(lo), float(hi)


def bootstrap_fit(
    points: Mapping[float, Sequence[float]], n_boot: int = 1000, seed: int = 0
) -> ScalingFit:
    """Fit ``E + A·N^(−α)`` on the mean of each size's seed losses (``points``: N -> losses), then
    ``n_boot`` replicates resampling each size's seeds with replacement (none when every size has
    one seed: there is no spread to resample)."""
    sizes = sorted(points)
    values = [
        np.asarray([v for v in points[s] if v is not None and math.isfinite(v)], dtype=float)
        for s in sizes
    ]
    if any(len(v) == 0 for v in values):
        empty = [s for s, v in zip(sizes, values) if len(v) == 0]
        raise PowerLawError(f"no finite loss at size(s) {empty}")
    means = [float(v.mean()) for v in values]
    law = fit_power_law(sizes, means)
    rmse = float(np.sqrt(np.mean((np.asarray(law(np.asarray(sizes))) - np.asarray(means)) ** 2)))
    fit = ScalingFit(law, [float(s) for s in sizes], means, rmse=rmse)
    if all(len(v) < 2 for v in values) or n_boot <= 0:
        return fit
    rng = np.random.default_rng(seed)
    for _ in range(n_boot):
        resampled = [float(rng.choice(v, size=len(v), replace=True).mean()) for v in values]
        try:
            fit.replicates.append(fit_power_law(sizes, resampled))
        except (RuntimeError, ValueError):  # curve_fit found no minimum within maxfev
            fit.failed += 1
    return fit


def crossings(f: PowerLaw, g: PowerLaw, lo: float, hi: float, points: int = 2000) -> list[float]:
    """Every N in [lo, hi] where ``f(N) = g(N)`` (ascending; empty when the curves do not cross
    there)."""
    if not 0 < lo < hi:
        raise ValueError(f"crossings need 0 < lo < hi, got lo={lo}, hi={hi}")

    def diff(log_n: float) -> float:
        n = math.exp(log_n)
        return float(f(n) - g(n))

    grid = np.linspace(math.log(lo), math.log(hi), points)
    d = f(np.exp(grid)) - g(np.exp(grid))  # (points,)
    out: list[float] = []
    for i in np.flatnonzero(d[:-1] * d[1:] <= 0):
        if d[i] == 0.0:
            out.append(math.exp(grid[i]))
        elif d[i + 1] != 0.0:  # a zero at i + 1 is recorded at its own index
            out.append(math.exp(brentq(diff, grid[i], grid[i + 1], xtol=1e-12)))
    if d[-1] == 0.0:
        out.append(math.exp(grid[-1]))
    return out
