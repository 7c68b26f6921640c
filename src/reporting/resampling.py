"""Tests and intervals by resampling the seeds, every one from ``scipy.stats``.

For a metric the t-test does not fit (bounded, two-valued over seeds, or without spread: exact match
on 5 seeds is often 0.0 or 1.0), ``src.reporting.comparisons`` uses these:

* **Sign-flip test** (Fisher 1935; paired): under H0 each per-seed difference ``d_i = a_i - b_i`` is
  as likely to have either sign, so the null distribution of ``mean(d)`` is its value over all 2^n
  sign assignments (``scipy.stats.permutation_test(..., permutation_type='samples')`` on the one
  sample ``d``). Exact for n <= ``EXACT_PAIRS``; beyond that ``DRAWS`` random assignments (fixed
  seed). Two-sided; its smallest possible p is ``2 / 2^n`` (0.0625 for 5 pairs): ``p_floor``.
* **Two-sample permutation test** (unpaired): ``mean(a) - mean(b)`` over every split of the pooled
  values into groups of the two sizes (``permutation_type='independent'``); exact up to
  ``EXACT_SPLITS`` splits, else ``DRAWS`` random ones. Smallest p: ``2 / C(n_a + n_b, n_a)``.
* **TOST** by the same tests, one-sided, on the differences shifted by ``±margin``.
* **BCa bootstrap interval** (Efron 1987) of Δ over seeds (``scipy.stats.bootstrap``,
  ``RESAMPLES`` resamples, fixed seed): of ``mean(d)`` (paired) or ``mean(a) - mean(b)``. When
  every resample gives the same value (no spread) the interval is that value.

tests/reporting/test_resampling.py checks them against scipy and hand enumeration.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from src.reporting.stats import CONFIDENCE

EXACT_PAIRS = 16  # 2^16 = 65,536 sign assignments
EXACT_SPLITS = 100_000
DRAWS = 100_000  # random assignments or splits beyond the exact limits
RESAMPLES = 9_999  # bootstrap resamples
SEED = 0  # the random draws' seed: a report is the same each time it is built


@dataclass(frozen=True)
class Resampled:
    """A resampling test of Δ and its bootstrap interval."""

    p: float  # two-sided
    p_floor: float  # the smallest p the test can give at these sample sizes
    exact: bool  # every assignment enumerated (else ``DRAWS`` random ones)
    ci_low: float
    ci_high: float

    @property
    def draws(self) -> str:
        return "exact" if self.exact else f"{DRAWS:,} random draws"


def sign_flip_floor(n: int) -> float:
    """The smallest two-sided p of the sign-flip test on ``n`` pairs: ``2 / 2^n``."""
    return min(1.0, 2.0 / 2.0**n)


def split_floor(n_a: int, n_b: int) -> float:
    """The smallest two-sided p of the two-sample permutation test: ``2 / C(n_a + n_b, n_a)``."""
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a))


def pairs_for_floor(alpha: float) -> int:
    """The fewest pairs whose sign-flip test can give a p below ``alpha``."""
    n = 1
    while sign_flip_floor(n) >= alpha:
        n += 1
    return n


def _mean_diff(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(a, axis=axis) - np.mean(b, axis=axis)


def _permutation_p(
    data: tuple[np.ndarray, ...], statistic, kind: str, exact: bool, alternative: str
) -> float:
    """``scipy.stats.permutation_test``: every assignment when ``exact``, else ``DRAWS``."""
    r = stats.permutation_test(
        data,
        statistic,
        permutation_type=kind,
        vectorized=True,
        n_resamples=np.inf if exact else DRAWS,
        alternative=alternative,
        rng=np.random.default_rng(SEED),
    )
    return float(r.pvalue)


def _sign_flip_p(d: np.ndarray, alternative: str = "two-sided") -> tuple[float, bool]:
    exact = d.size <= EXACT_PAIRS
    return _permutation_p((d,), np.mean, "samples", exact, alternative), exact


def _split_p(a: np.ndarray, b: np.ndarray, alternative: str = "two-sided") -> tuple[float, bool]:
    exact = math.comb(a.size + b.size, a.size) <= EXACT_SPLITS
    return _permutation_p((a, b), _mean_diff, "independent", exact, alternative), exact


def _interval(data: tuple[np.ndarray, ...], statistic, point: float) -> tuple[float, float]:
    """BCa interval; the point itself when the resamples cannot vary."""
    if all(np.ptp(x) == 0 for x in data):
        return point, point
    r = stats.bootstrap(
        data,
        statistic,
        n_resamples=RESAMPLES,
        vectorized=True,
        method="BCa",
        confidence_level=CONFIDENCE,
        rng=np.random.default_rng(SEED),
    )
    low, high = float(r.confidence_interval.low), float(r.confidence_interval.high)
    return low, high


def sign_flip_test(a: Sequence[float], b: Sequence[float]) -> Resampled | None:
    """The paired test of ``a[i] - b[i]`` (same seed), with the BCa interval of the mean
    difference; None with fewer than 2 pairs."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if d.size < 2 or not np.isfinite(d).all():
        return None
    p, exact = _sign_flip_p(d)
    low, high = _interval((d,), np.mean, float(np.mean(d)))
    return Resampled(p, sign_flip_floor(d.size), exact, low, high)


def permutation_test(a: Sequence[float], b: Sequence[float]) -> Resampled | None:
    """The unpaired test of ``mean(a) = mean(b)`` with the BCa interval of the difference; None
    when a side has fewer than 2 values."""
    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if xa.size < 2 or xb.size < 2:
        return None
    p, exact = _split_p(xa, xb)
    low, high = _interval((xa, xb), _mean_diff, float(np.mean(xa) - np.mean(xb)))
    return Resampled(p, split_floor(xa.size, xb.size), exact, low, high)


def sign_flip_tost(a: Sequence[float], b: Sequence[float], margin: float) -> float:
    """Equivalence within ``±margin`` by two one-sided sign-flip tests of the shifted differences."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    above, _ = _sign_flip_p(d + margin, "greater")  # H0: Δ <= -margin
    below, _ = _sign_flip_p(d - margin, "less")  # H0: Δ >= +margin
    return max(above, below)


def permutation_tost(a: Sequence[float], b: Sequence[float], margin: float) -> float:
    """Equivalence within ``±margin`` by two one-sided two-sample permutation tests."""
    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    above, _ = _split_p(xa + margin, xb, "greater")
    below, _ = _split_p(xa - margin, xb, "less")
    return max(above, below)
