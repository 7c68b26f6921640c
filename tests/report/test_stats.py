"""Welch's t-test and the summaries of src.analysis.report_stats against tabulated values."""
from __future__ import annotations

import math

import pytest

from src.analysis.report_stats import betainc, compare, summarize, t_two_sided_p, welch_t_test


@pytest.mark.parametrize(
    ("t", "df", "p"),
    [
        (12.706, 1, 0.05),  # Student's t table: two-sided 5% critical values
        (4.303, 2, 0.05),
        (2.228, 10, 0.05),
        (2.0, 1, 0.2951672353),  # 1 - 2/pi * atan(2) (Cauchy)
        (1.959964, 1e7, 0.05),  # normal limit
        (0.0, 3, 1.0),
    ],
)
def test_t_two_sided_p_matches_tables(t: float, df: float, p: float) -> None:
    assert t_two_sided_p(t, df) == pytest.approx(p, abs=2e-4)


def test_betainc_symmetry_and_known_value() -> None:
    assert betainc(2.0, 3.0, 0.4) == pytest.approx(0.5248, abs=1e-4)  # I_0.4(2,3) = 0.5248
    assert betainc(2.5, 1.5, 0.3) + betainc(1.5, 2.5, 0.7) == pytest.approx(1.0, abs=1e-12)


def test_welch_matches_hand_computation() -> None:
    a, b = [1.0, 2.0, 3.0], [4.0, 5.0, 7.5]
    va, vb = 1.0 / 3, 3.25 / 3  # s²/n with sample variances (ddof=1) 1 and 3.25
    t = (2.0 - 5.5) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 2)
    r = welch_t_test(a, b, use_scipy=False)
    assert r is not None and r.backend == "builtin"
    assert r.t == pytest.approx(t) and r.df == pytest.approx(df)
    assert r.p == pytest.approx(t_two_sided_p(t, df))
    assert 0.05 < r.p < 0.07


def test_summaries_and_verdicts() -> None:
    s = summarize([1.0, 3.0, float("nan"), None])
    assert (s.mean, s.std, s.n) == (2.0, pytest.approx(math.sqrt(2.0)), 2)
    assert summarize([5.0]).std is None and summarize([]).mean is None
    assert compare([1.0], [2.0, 2.1]).verdict == "cannot tell (1 seed)"
    assert compare([1.0, 1.0], [2.0, 2.0]).verdict == "cannot tell (no seed spread)"
    assert compare([1.0, 1.01], [2.0, 2.01]).verdict == "differs"
    assert compare([1.0, 2.0], [1.1, 2.1]).verdict == "within seed noise"
