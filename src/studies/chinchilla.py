"""``L(N, D) = E + A·N^(−α) + B·D^(−β)``: the loss against parameters N and training tokens D,
fitted as Hoffmann et al. 2022 (§3.3, "Approach 3"; Appendix D.2), with bootstrap intervals and
the compute-optimal allocation.

* **Fit.** With E = exp(e), A = exp(a), B = exp(b), minimise the Huber loss (δ = 10⁻³) of
  ``LSE(a − α·log N, b − β·log D, e) − log L`` over the points with L-BFGS (scipy's L-BFGS-B, the
  analytic gradient), started from a grid (their grid: α, β ∈ {0, 0.5, …, 2}, e ∈ {−1, −0.5, …,
  1}, a, b ∈ {0, 5, …, 25}): the objective is evaluated at all 4,500 grid points and L-BFGS runs
  from the 16 best; the best end point wins. L-BFGS sees the Huber loss in units of δ² (the same
  minimiser): in raw units the summed loss is ~10⁻⁵ and its gradient falls under L-BFGS-B's
  absolute tolerance long before the optimum, so fits stopped near their start. Five parameters
  need more than five distinct (N, D) points (a one-line ``ConfigError`` otherwise).
* **Bootstrap.** Each replicate draws, for every (N, D) point independently, that point's seed
  losses with replacement (its mean, its deviation from the point's mean scaled by √(k/(k−1))
  for k seeds so that it varies as much as the mean does, then enters the fit), and refits from the full-data optimum
  and the best point of a coarse grid; intervals are the 2.5th–97.5th percentiles. With one seed per point the
  points themselves are resampled (Besiroglu et al. 2024 bootstrap the points).
* **Compute-optimal.** With C = 6·N·D (Kaplan et al. 2020), minimising L at fixed C gives
  N_opt = G·(C/6)^(β/(α+β)), D_opt = (C/6)^(α/(α+β)) / G, G = (αA/(βB))^(1/(α+β)) (Hoffmann et
  al. 2022, Eq. 4); the intervals are those of the replicates' N_opt, D_opt.
* **Branches.** The points come from cooldown branches (``scheduler.decay_from``) of one WSD
  trunk per size: ``check_trunks`` refuses two trunks at one size in one fit.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

from src.errors import ConfigError

PARAMS = ("E", "A", "B", "alpha", "beta")
HUBER_DELTA = 1e-3
#: the override of a cooldown branch: the trunk checkpoint it continues (src/optim/wsd.py)
BRANCH_KEY = "scheduler.decay_from"
#: Hoffmann et al. 2022, Appendix D.2: the initialisation grid (α, β, e, a, b)
GRID = (
    np.arange(0.0, 2.01, 0.5),
    np.arange(0.0, 2.01, 0.5),
    np.arange(-1.0, 1.01, 0.5),
    np.arange(0.0, 25.01, 5.0),
    np.arange(0.0, 25.01, 5.0),
)
COARSE = (
    np.array([0.3, 0.6]),
    np.array([0.3, 0.6]),
    np.array([0.0, 0.5]),
    np.array([5.0, 10.0]),
    np.array([5.0, 10.0]),
)


@dataclass(frozen=True)
class LossLaw:
    """``L(N, D) = E + A·N^(−α) + B·D^(−β)``."""

    E: float
    A: float
    B: float
    alpha: float
    beta: float

    def __call__(self, n: float | np.ndarray, d: float | np.ndarray) -> float | np.ndarray:
        n, d = np.asarray(n, dtype=float), np.asarray(d, dtype=float)
        return self.E + self.A * n ** (-self.alpha) + self.B * d ** (-self.beta)

    def optimal(self, compute: float) -> tuple[float, float]:
        """(N_opt, D_opt) at ``compute`` FLOPs, C = 6·N·D (Hoffmann et al. 2022, Eq. 4)."""
        a, b = self.alpha, self.beta
        g = (a * self.A / (b * self.B)) ** (1.0 / (a + b))
        return g * (compute / 6.0) ** (b / (a + b)), (compute / 6.0) ** (a / (a + b)) / g


def logsumexp(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """log Σ exp(x) along ``axis``, stably (scipy's has a large per-call overhead, and the fit
    calls it thousands of times)."""
    m = x.max(axis=axis, keepdims=True)
    return np.squeeze(m, axis=axis) + np.log(np.exp(x - m).sum(axis=axis))


def _objective(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray, log_l: np.ndarray):
    """Huber(LSE(a − α log N, b − β log D, e) − log L), summed, in units of δ²; and its gradient
    in θ = (a, b, e, α, β)."""
    a, b, e, alpha, beta = theta
    terms = np.stack([a - alpha * log_n, b - beta * log_d, np.full_like(log_n, e)])  # [3, P]
    lse = logsumexp(terms, axis=0)  # [P]
    r = lse - log_l
    small = np.abs(r) <= HUBER_DELTA
    loss = np.where(small, 0.5 * r**2, HUBER_DELTA * (np.abs(r) - 0.5 * HUBER_DELTA)).sum()
    dr = np.where(small, r, HUBER_DELTA * np.sign(r))  # dHuber/dr [P]
    w = np.exp(terms - lse)  # softmax weights [3, P]
    grad = np.array(
        [
            (dr * w[0]).sum(),
            (dr * w[1]).sum(),
            (dr * w[2]).sum(),
            -(dr * w[0] * log_n).sum(),
            -(dr * w[1] * log_d).sum(),
        ]
    )
    return loss / HUBER_DELTA**2, grad / HUBER_DELTA**2


def _huber_at(starts: np.ndarray, log_n, log_d, log_l) -> np.ndarray:
    """The objective at each start [S, 5] (α, β, e, a, b), vectorised: [S]."""
    alpha, beta, e, a, b = (starts[:, i : i + 1] for i in range(5))  # [S, 1] each
    terms = np.stack(
        [a - alpha * log_n, b - beta * log_d, np.broadcast_to(e, (len(starts), len(log_n)))]
    )  # [3, S, P]
    r = logsumexp(terms, axis=0) - log_l  # [S, P]
    h = np.where(
        np.abs(r) <= HUBER_DELTA, 0.5 * r**2, HUBER_DELTA * (np.abs(r) - 0.5 * HUBER_DELTA)
    )
    return h.sum(axis=1)


def _fit(log_n, log_d, log_l, starts, keep: int = 16) -> tuple[np.ndarray, float]:
    """L-BFGS from the ``keep`` best starts of the grid (the objective evaluated at every start
    first: thousands of L-BFGS runs would take minutes and end at the same few optima)."""
    grid = np.array(list(starts), dtype=float)  # [S, 5]
    order = np.argsort(_huber_at(grid, log_n, log_d, log_l))[:keep]
    best, best_loss = None, math.inf
    for alpha, beta, e, a, b in grid[order]:
        res = minimize(
            _objective,
            np.array([a, b, e, alpha, beta]),
            args=(log_n, log_d, log_l),
            jac=True,
            method="L-BFGS-B",
        )
        if res.fun < best_loss and np.all(np.isfinite(res.x)):
            best, best_loss = res.x, float(res.fun)
    assert best is not None
    return best, best_loss


def _law(theta: np.ndarray) -> LossLaw:
    a, b, e, alpha, beta = (float(x) for x in theta)
    return LossLaw(E=math.exp(e), A=math.exp(a), B=math.exp(b), alpha=alpha, beta=beta)


def _prefix(label: str) -> str:
    return f"{label}: " if label else ""


def fit_loss_law(
    n: Sequence[float], d: Sequence[float], loss: Sequence[float], grid=GRID, label: str = ""
) -> LossLaw:
    """Approach 3 on (N, D, L) points (module docstring); ``label`` (e.g. ``arm pre_rope``) opens
    the refusals."""
    n_, d_, l_ = (np.asarray(x, dtype=float) for x in (n, d, loss))
    if not (n_.shape == d_.shape == l_.shape) or not np.all((n_ > 0) & (d_ > 0) & (l_ > 0)):
        raise ConfigError(
            f"{_prefix(label)}an L(N, D) fit needs positive N, D and losses of equal length; check the runs' "
            "params, tokens and metric"
        )
    distinct = len(set(zip(n_.tolist(), d_.tolist(), strict=True)))
    if distinct <= len(PARAMS):
        raise ConfigError(
            f"{_prefix(label)}L(N, D) = E + A·N^-α + B·D^-β has {len(PARAMS)} parameters but only {distinct} "
            f"distinct (N, D) points; add sizes or cooldown budgets (more than {len(PARAMS)} points)"
        )
    theta, _ = _fit(np.log(n_), np.log(d_), np.log(l_), itertools.product(*grid))
    return _law(theta)


@dataclass
class LossLawFit:
    """The fit on every (N, D) point's mean, its bootstrap replicates, and derived numbers."""

    law: LossLaw
    points: list[tuple[float, float, float]]  # (N, D, mean loss)
    replicates: list[LossLaw] = field(default_factory=list)

    def interval(self, name: str, level: float = 0.95) -> tuple[float, float] | None:
        if not self.replicates:
            return None
        v = np.array([getattr(r, name) for r in self.replicates])
        lo, hi = np.percentile(v, [50 * (1 - level), 50 * (1 + level)])
        return float(lo), float(hi)

    def optimal(self, compute: float, level: float = 0.95) -> dict[str, tuple[float, ...]]:
        """{"N": (N_opt, lo, hi), "D": (D_opt, lo, hi)} at ``compute`` FLOPs (lo, hi: nan without
        replicates)."""
        n, d = self.law.optimal(compute)
        out = {"N": (n, math.nan, math.nan), "D": (d, math.nan, math.nan)}
        if self.replicates:
            reps = np.array([r.optimal(compute) for r in self.replicates])  # [R, 2]
            q = [50 * (1 - level), 50 * (1 + level)]
            out["N"] = (n, *np.percentile(reps[:, 0], q))
            out["D"] = (d, *np.percentile(reps[:, 1], q))
        return out


def bootstrap_loss_law(
    points: Mapping[tuple[float, float], Sequence[float]],
    n_boot: int = 200,
    seed: int = 0,
    grid=GRID,
    label: str = "",
) -> LossLawFit:
    """Fit on each (N, D) point's mean seed loss, then ``n_boot`` replicates (module
    docstring); ``label`` opens the refusals."""
    keys = sorted(points)
    values = [np.asarray([v for v in points[k] if math.isfinite(v)], dtype=float) for k in keys]
    if any(len(v) == 0 for v in values):
        raise ConfigError(
            f"{_prefix(label)}no finite loss at (N, D) = {[k for k, v in zip(keys, values) if not len(v)]}"
        )
    n = np.array([k[0] for k in keys], dtype=float)
    d = np.array([k[1] for k in keys], dtype=float)
    means = np.array([v.mean() for v in values])
    law = fit_loss_law(n, d, means, grid=grid, label=label)
    fit = LossLawFit(law, [(float(a), float(b), float(c)) for a, b, c in zip(n, d, means)])
    if n_boot <= 0:
        return fit
    rng = np.random.default_rng(seed)
    start = np.array([math.log(law.A), math.log(law.B), math.log(law.E), law.alpha, law.beta])
    starts = [tuple(start[[3, 4, 2, 0, 1]]), *itertools.product(*COARSE)]
    per_point = all(len(v) == 1 for v in values)
    # a resampled mean of k seeds varies (k − 1)/k as much as the mean does: scaled back
    inflate = np.array([math.sqrt(len(v) / (len(v) - 1)) if len(v) > 1 else 0.0 for v in values])
    for _ in range(n_boot):
        if per_point:  # one seed per point: resample the points
            idx = rng.integers(0, len(keys), len(keys))
            if len(set(idx.tolist())) <= len(PARAMS):
                continue
            nn, dd, ll = n[idx], d[idx], means[idx]
        else:
            nn, dd = n, d
            ll = means + inflate * (
                np.array([rng.choice(v, size=len(v), replace=True).mean() for v in values]) - means
            )
        theta, _ = _fit(np.log(nn), np.log(dd), np.log(ll), starts, keep=2)
        fit.replicates.append(_law(theta))
    return fit


def check_trunks(trunks: Mapping[float, set[str]], label: str = "") -> None:
    """``trunks``: N -> the trunk checkpoints its branches were cut from (``scheduler.decay_from``;
    a run that is itself a trunk names its own directory). One trunk per size, or refuse;
    ``label`` (e.g. ``arm pre_rope, seed 1``) opens the refusal."""
    for size, names in sorted(trunks.items()):
        if len(names) > 1:
            listed = ", ".join(sorted(names))
            raise ConfigError(
                f"{_prefix(label)}the points at N={size:.4g} branch from {len(names)} different trunks ({listed}); "
                "an L(N, D) fit takes the cooldown branches of one WSD trunk per size: report each "
                "trunk's branches apart, or rerun them from one scheduler.decay_from"
            )
