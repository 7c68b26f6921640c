"""Statistics of sweep reports, every test from ``scipy.stats``.

All figures are over seeds: one number per run (its final metric), ``n`` runs per variant.

* **Summary** — mean, sample standard deviation (``ddof=1``) and the 95 % Student-t interval of
  the mean, ``mean ± t_{0.975, n-1} · s / sqrt(n)`` (``scipy.stats.t.interval``).
* **Welch's t-test** (Welch 1947) of ``mean(a) = mean(b)`` with unequal variances::

      t  = (m_a - m_b) / se,   se = sqrt(s_a²/n_a + s_b²/n_b)
      df = se⁴ / ((s_a²/n_a)²/(n_a-1) + (s_b²/n_b)²/(n_b-1))        (Welch–Satterthwaite)

  two-sided p and the 95 % interval of ``Δ = m_a - m_b`` from
  ``scipy.stats.ttest_ind(a, b, equal_var=False)`` (``.confidence_interval()``).
* **TOST** (two one-sided tests; Schuirmann 1987) of equivalence within ``±margin``: ``H0: |Δ| ≥
  margin`` is rejected when both ``Δ > -margin`` and ``Δ < margin`` are, each by a one-sided
  Welch test; ``p = max`` of the two (``ttest_ind(a ± margin, b, alternative=...)``: shifting a
  sample moves its mean and leaves its variance alone).
* **Paired t-test** (Student 1908, on differences) when both sides ran the same seeds on the same
  data order: with ``d_i = a_i - b_i`` over the n shared seeds, ``t = mean(d) / (s_d / sqrt(n))``,
  ``df = n - 1`` (``scipy.stats.ttest_rel``, its ``.confidence_interval()`` for Δ). A run's
  batches are a pure function of (seed, rank, batch index), so two variants with one seed see the
  same data in the same order, and the noise they share cancels in ``d``. Paired TOST shifts
  ``a`` by ``±margin`` in ``ttest_rel``; the paired MDE uses ``se = s_d / sqrt(n)``, ``df = n - 1``.
* **Minimum detectable effect** — the smallest ``|Δ|`` that the two-sided test at level
  ``alpha`` finds with probability ``power`` given the observed spreads and seed counts: the
  root of ``P(|T'| > t_{1-α/2, df}) = power`` with ``T'`` noncentral t (``scipy.stats.nct``)
  of noncentrality ``Δ / se`` (``scipy.optimize.brentq``); Welch's se and df, or the paired ones.

tests/reporting/test_stats.py checks each against hand computations, Student's t tables and
published power figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

CONFIDENCE = 0.95
POWER = 0.8


@dataclass
class Summary:
    """Mean, sample standard deviation and t-interval of the finite values; ``n`` counts them."""

    mean: float | None
    std: float | None  # None when n < 2
    n: int
    ci_low: float | None = None  # 95 % t-interval of the mean (None when n < 2)
    ci_high: float | None = None

    def format(self, digits: int = 3) -> str:
        if self.mean is None:
            return "–"
        if self.std is None:
            return f"{self.mean:.{digits}f}"
        return f"{self.mean:.{digits}f} ± {self.std:.{digits}f}"


def finite_array(values: Sequence[float | None]) -> np.ndarray:
    xs = np.array([float(v) for v in values if v is not None], dtype=np.float64)
    return xs[np.isfinite(xs)]


def summarize(values: Sequence[float | None], confidence: float = CONFIDENCE) -> Summary:
    """Mean ± sample std (n-1 in the denominator) and the t-interval over the finite values."""
    xs = finite_array(values)
    if xs.size == 0:
        return Summary(None, None, 0)
    mean = float(np.mean(xs))
    if xs.size < 2:
        return Summary(mean, None, 1)
    std = float(np.std(xs, ddof=1))
    if std == 0.0:  # no spread: the interval collapses onto the mean
        return Summary(mean, 0.0, int(xs.size), mean, mean)
    lo, hi = stats.t.interval(confidence, xs.size - 1, loc=mean, scale=stats.sem(xs))
    return Summary(mean, std, int(xs.size), float(lo), float(hi))


@dataclass
class WelchTest:
    t: float
    df: float  # Welch–Satterthwaite degrees of freedom (real-valued)
    p: float  # two-sided
    ci_low: float  # interval of mean(a) - mean(b)
    ci_high: float


def _testable(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray] | None:
    """The finite samples when both have >= 2 values and some spread; else None."""
    xa, xb = finite_array(a), finite_array(b)
    if xa.size < 2 or xb.size < 2:
        return None
    if np.var(xa, ddof=1) / xa.size + np.var(xb, ddof=1) / xb.size == 0.0:
        return None
    return xa, xb


def welch_t_test(
    a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE
) -> WelchTest | None:
    """Welch's two-sided test of mean(a) = mean(b) and the interval of the difference; None
    when either side has < 2 finite values or both have zero spread."""
    pair = _testable(a, b)
    if pair is None:
        return None
    r = stats.ttest_ind(*pair, equal_var=False)
    ci = r.confidence_interval(confidence)
    return WelchTest(
        float(r.statistic), float(r.df), float(r.pvalue), float(ci.low), float(ci.high)
    )


def tost(a: Sequence[float], b: Sequence[float], margin: float) -> float | None:
    """p-value of equivalence, ``|mean(a) - mean(b)| < margin`` (two one-sided Welch tests)."""
    if not margin or margin <= 0:
        return None
    pair = _testable(a, b)
    if pair is None:
        return None
    xa, xb = pair
    # H0: Δ <= -margin
    above = stats.ttest_ind(xa + margin, xb, equal_var=False, alternative="greater")
    # H0: Δ >= +margin
    below = stats.ttest_ind(xa - margin, xb, equal_var=False, alternative="less")
    return float(max(above.pvalue, below.pvalue))


def welch_se_df(a: Sequence[float], b: Sequence[float]) -> tuple[float, float] | None:
    """(standard error of the difference, Welch–Satterthwaite df), or None if untestable."""
    pair = _testable(a, b)
    if pair is None:
        return None
    xa, xb = pair
    va, vb = np.var(xa, ddof=1) / xa.size, np.var(xb, ddof=1) / xb.size
    df = (va + vb) ** 2 / (va**2 / (xa.size - 1) + vb**2 / (xb.size - 1))
    return float(math.sqrt(va + vb)), float(df)


def power_at(effect: float, se: float, df: float, alpha: float) -> float:
    """Probability that a two-sided t-test at ``alpha`` rejects when the true difference is
    ``effect``."""
    crit = stats.t.ppf(1 - alpha / 2, df)
    nc = abs(effect) / se
    upper, lower = float(stats.nct.sf(crit, df, nc)), float(stats.nct.cdf(-crit, df, nc))
    # far in the tails scipy's noncentral t returns NaN where the probability has underflowed
    upper = upper if math.isfinite(upper) else (1.0 if nc > crit else 0.0)
    lower = lower if math.isfinite(lower) else 0.0
    return upper + lower


def minimum_detectable_effect(
    a: Sequence[float], b: Sequence[float], alpha: float = 0.05, power: float = POWER
) -> float | None:
    """Smallest ``|Δ|`` Welch's test at ``alpha`` detects with probability ``power`` (observed
    spreads)."""
    se_df = welch_se_df(a, b)
    return None if se_df is None else detectable_effect(*se_df, alpha=alpha, power=power)


def detectable_effect(se: float, df: float, alpha: float = 0.05, power: float = POWER) -> float:
    """Smallest ``|Δ|`` a two-sided t-test with standard error ``se`` and ``df`` degrees of freedom
    rejects at ``alpha`` with probability ``power``."""
    hi = se
    while power_at(hi, se, df, alpha) < power:
        hi *= 2.0
    return float(
        optimize.brentq(lambda d: power_at(d, se, df, alpha) - power, 0.0, hi, xtol=1e-12 * hi)
    )


@dataclass
class PairedTest:
    """The paired t-test of Δ = mean(a - b) over shared seeds."""

    t: float
    df: float  # n - 1
    p: float  # two-sided
    ci_low: float  # interval of mean(a - b)
    ci_high: float
    n: int  # pairs
    correlation: float | None  # Pearson r of the paired values (None when one side has no spread)
    se: float  # s_d / sqrt(n)


def _paired(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray] | None:
    """Both as arrays when there are >= 2 pairs of finite values and the differences vary; else
    None."""
    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if xa.shape != xb.shape or xa.size < 2 or not (np.isfinite(xa).all() and np.isfinite(xb).all()):
        return None
    if np.var(xa - xb, ddof=1) == 0.0:
        return None
    return xa, xb


def paired_t_test(
    a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE
) -> PairedTest | None:
    """``scipy.stats.ttest_rel(a, b)`` (``a[i]`` and ``b[i]`` share a seed) and the interval of Δ;
    None with < 2 pairs or no spread in the differences."""
    pair = _paired(a, b)
    if pair is None:
        return None
    xa, xb = pair
    r = stats.ttest_rel(xa, xb)
    ci = r.confidence_interval(confidence)
    corr = None
    if np.std(xa) > 0 and np.std(xb) > 0:
        corr = float(np.corrcoef(xa, xb)[0, 1])
    se = float(np.std(xa - xb, ddof=1) / math.sqrt(xa.size))
    return PairedTest(
        float(r.statistic),
        float(r.df),
        float(r.pvalue),
        float(ci.low),
        float(ci.high),
        int(xa.size),
        corr,
        se,
    )


def paired_tost(a: Sequence[float], b: Sequence[float], margin: float) -> float | None:
    """p-value of equivalence within ``±margin`` by two one-sided paired tests (``ttest_rel``)."""
    if not margin or margin <= 0:
        return None
    pair = _paired(a, b)
    if pair is None:
        return None
    xa, xb = pair
    above = stats.ttest_rel(xa + margin, xb, alternative="greater")  # H0: Δ <= -margin
    below = stats.ttest_rel(xa - margin, xb, alternative="less")  # H0: Δ >= +margin
    return float(max(above.pvalue, below.pvalue))


def paired_minimum_detectable_effect(
    a: Sequence[float], b: Sequence[float], alpha: float = 0.05, power: float = POWER
) -> float | None:
    """Smallest ``|Δ|`` the paired test at ``alpha`` detects with probability ``power``: se of the
    differences, n - 1 degrees of freedom."""
    test = paired_t_test(a, b)
    return None if test is None else detectable_effect(test.se, test.df, alpha=alpha, power=power)


def seeds_needed(
    delta: float,
    sd_a: float,
    sd_b: float | None = None,
    alpha: float = 0.05,
    power: float = POWER,
    paired: bool = False,
    most: int = 1000,
) -> int | None:
    """Seeds per variant at which the test at ``alpha`` finds ``|delta|`` with probability
    ``power``, at the given spreads: Welch's (``sd_a``, ``sd_b``: the two samples' standard
    deviations) or the paired test (``paired``: ``sd_a`` is the standard deviation of the per-seed
    differences). None when ``delta`` is 0 or more than ``most`` seeds would be needed."""
    if not delta or not math.isfinite(delta):
        return None
    for n in range(2, most + 1):
        if paired:
            se, df = sd_a / math.sqrt(n), n - 1.0
        else:
            va, vb = sd_a**2 / n, (sd_b if sd_b is not None else sd_a) ** 2 / n
            se = math.sqrt(va + vb)
            df = (va + vb) ** 2 / (va**2 / (n - 1) + vb**2 / (n - 1)) if va + vb > 0 else n - 1.0
        if se == 0.0 or power_at(delta, se, df, alpha) >= power:
            return n
    return None
