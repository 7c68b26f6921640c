"""Statistics for sweep reports: mean ± std over seeds and Welch's t-test.

Welch's unequal-variance t-test (Welch 1947) compares two variants' final losses across
seeds::

    t  = (mean_a - mean_b) / sqrt(s_a²/n_a + s_b²/n_b)
    df = (s_a²/n_a + s_b²/n_b)² / ((s_a²/n_a)²/(n_a-1) + (s_b²/n_b)²/(n_b-1))     (Welch–Satterthwaite)
    p  = P(|T_df| >= |t|) = I_{df/(df+t²)}(df/2, 1/2)                            (two-sided)

``scipy.stats.ttest_ind(equal_var=False)`` computes it when scipy is installed; otherwise the
regularized incomplete beta function ``I_x(a, b)`` is evaluated here by its continued
fraction (Numerical Recipes §6.4, modified Lentz). Both give the same p to ~1e-10
(tests/report/test_stats.py checks tabulated values).

With n seeds per variant, df is about 2(n-1): with 2 seeds only differences several times
the seed spread reach p < 0.05. With one seed there is no spread, and the test says so
instead of guessing.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

try:  # optional: the same numbers, from a reference implementation
    from scipy import stats as _scipy_stats  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the environment
    _scipy_stats = None

TEST_NAME = "Welch's two-sided t-test (unequal variances)"


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


def summarize(values: Sequence[float | None]) -> Summary:
    """Mean ± sample std (n-1 in the denominator) over the finite values."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not xs:
        return Summary(None, None, 0)
    mean = sum(xs) / len(xs)
    if len(xs) < 2:
        return Summary(mean, None, 1)
    var = sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)
    return Summary(mean, math.sqrt(var), len(xs))


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            return h
    raise ArithmeticError(f"incomplete beta continued fraction did not converge (a={a}, b={b}, x={x})")


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"betainc: x={x} must be in [0, 1]")
    if x in (0.0, 1.0):
        return x
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` (real-valued) degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


@dataclass
class TTest:
    t: float
    df: float
    p: float
    backend: str  # "scipy" or "builtin"


def welch_t_test(a: Sequence[float], b: Sequence[float], *, use_scipy: bool = True) -> TTest | None:
    """Welch's two-sided t-test of mean(a) = mean(b); None when either side has < 2 values
    or both have zero spread (no seed noise to compare against)."""
    a, b = [float(x) for x in a], [float(x) for x in b]
    if len(a) < 2 or len(b) < 2:
        return None
    sa, sb = summarize(a), summarize(b)
    assert sa.std is not None and sb.std is not None and sa.mean is not None and sb.mean is not None
    va, vb = sa.std**2 / len(a), sb.std**2 / len(b)
    if va + vb == 0.0:
        return None
    if use_scipy and _scipy_stats is not None:
        r = _scipy_stats.ttest_ind(a, b, equal_var=False)
        df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
        return TTest(float(r.statistic), float(df), float(r.pvalue), "scipy")
    t = (sa.mean - sb.mean) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return TTest(t, df, t_two_sided_p(t, df), "builtin")


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
    test = welch_t_test([v for v in variant if v is not None and math.isfinite(v)],
                        [v for v in reference if v is not None and math.isfinite(v)])
    if test is None:
        return Comparison(delta, None, "cannot tell (no seed spread)")
    return Comparison(delta, test, "differs" if test.p < alpha else "within seed noise")
