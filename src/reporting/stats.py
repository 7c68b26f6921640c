"""Statistics for sweep reports: mean ± std over seeds (numpy) and Welch's t-test (scipy).

Welch's unequal-variance t-test (Welch 1947) compares two variants' final losses across
seeds::

    t  = (mean_a - mean_b) / sqrt(s_a²/n_a + s_b²/n_b)
    df = (s_a²/n_a + s_b²/n_b)² / ((s_a²/n_a)²/(n_a-1) + (s_b²/n_b)²/(n_b-1))     (Welch–Satterthwaite)
    p  = P(|T_df| >= |t|)                                                          (two-sided)

computed by ``scipy.stats.ttest_ind(a, b, equal_var=False)``; the summaries are
``numpy.mean`` and ``numpy.std(ddof=1)``. tests/reporting/test_stats.py checks them against a
hand computation and Student's t tables.

With n seeds per variant, df is about 2(n-1): with 2 seeds only differences several times
the seed spread reach p < 0.05. With one seed there is no spread, and the test says so
instead of guessing.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

TEST_NAME = "Welch's two-sided t-test (unequal variances)"
TEST_IMPLEMENTATION = "scipy.stats.ttest_ind(equal_var=False)"


@dataclass
class Summary:
    """Mean and sample standard deviation (ddof=1) of the finite values; ``n`` counts them."""

    mean: float | None
    std: float | None  # None when n < 2
    n: int

    def format(self, digits: int = 3) -> str:
        if self.mean is None:
            return "–"
        if self.std is None:
            return f"{self.mean:.{digits}f}"
        return f"{self.mean:.{digits}f} ± {self.std:.{digits}f}"


def _finite(values: Sequence[float | None]) -> np.ndarray:
    xs = np.array([float(v) for v in values if v is not None], dtype=np.float64)
    return xs[np.isfinite(xs)]


def summarize(values: Sequence[float | None]) -> Summary:
    """Mean ± sample std (n-1 in the denominator) over the finite values."""
    xs = _finite(values)
    if xs.size == 0:
        return Summary(None, None, 0)
    mean = float(np.mean(xs))
    if xs.size < 2:
        return Summary(mean, None, 1)
    return Summary(mean, float(np.std(xs, ddof=1)), int(xs.size))


@dataclass
class TTest:
    t: float
    df: float  # Welch–Satterthwaite degrees of freedom (real-valued)
    p: float  # two-sided


def welch_t_test(a: Sequence[float], b: Sequence[float]) -> TTest | None:
    """Welch's two-sided t-test of mean(a) = mean(b); None when either side has < 2 values
    or both have zero spread (no seed noise to compare against)."""
    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if xa.size < 2 or xb.size < 2:
        return None
    if np.var(xa, ddof=1) / xa.size + np.var(xb, ddof=1) / xb.size == 0.0:
        return None
    r = stats.ttest_ind(xa, xb, equal_var=False)
    return TTest(float(r.statistic), float(r.df), float(r.pvalue))


@dataclass
class Comparison:
    """One variant against another on one metric."""

    delta: float | None  # mean(variant) - mean(reference)
    test: TTest | None
    verdict: str  # "differs", "within seed noise", "cannot tell (...)"

    @property
    def significant(self) -> bool:
        return self.verdict == "differs"


def compare(variant: Sequence[float], reference: Sequence[float], alpha: float = 0.05) -> Comparison:
    """Mean difference and Welch's test; the verdict says plainly when it cannot tell."""
    sv, sr = summarize(variant), summarize(reference)
    delta = sv.mean - sr.mean if sv.mean is not None and sr.mean is not None else None
    if delta is None:
        return Comparison(None, None, "cannot tell (no finite result)")
    if sv.n < 2 or sr.n < 2:
        return Comparison(delta, None, f"cannot tell ({min(sv.n, sr.n)} seed{'s' if min(sv.n, sr.n) != 1 else ''})")
    test = welch_t_test(_finite(variant), _finite(reference))
    if test is None:
        return Comparison(delta, None, "cannot tell (no seed spread)")
    return Comparison(delta, test, "differs" if test.p < alpha else "within seed noise")
