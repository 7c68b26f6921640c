"""Welch's t-test and the summaries of src.reporting.stats against a hand computation and
Student's t tables."""
from __future__ import annotations

import math

import pytest

from src.reporting.stats import compare, summarize, welch_t_test


def test_welch_matches_hand_computation() -> None:
    a, b = [1.0, 2.0, 3.0], [4.0, 5.0, 7.5]
    va, vb = 1.0 / 3, 3.25 / 3  # s²/n with sample variances (ddof=1) 1 and 3.25
    t = (2.0 - 5.5) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 2)
    r = welch_t_test(a, b)
    assert r is not None
    assert r.t == pytest.approx(t) and r.df == pytest.approx(df)
    assert 0.05 < r.p < 0.07


@pytest.mark.parametrize(("n", "t_crit"), [(2, 4.303), (6, 2.228)])  # Student's t, two-sided 5%, df 2 and 10
def test_welch_p_at_tabulated_critical_values(n: int, t_crit: float) -> None:
    """Equal sizes and spreads give df = 2(n-1); a mean difference at the critical t gives p = 0.05."""
    a = [i - (n - 1) / 2 for i in range(n)]
    sd = summarize(a).std
    assert sd is not None
    shift = t_crit * math.sqrt(2 * sd**2 / n)
    r = welch_t_test([x + shift for x in a], a)
    assert r is not None
    assert r.df == pytest.approx(2 * (n - 1)) and r.t == pytest.approx(t_crit)
    assert r.p == pytest.approx(0.05, abs=2e-4)


def test_summaries_and_verdicts() -> None:
    s = summarize([1.0, 3.0, float("nan"), None])
    assert (s.mean, s.std, s.n) == (2.0, pytest.approx(math.sqrt(2.0)), 2)
    assert summarize([5.0]).std is None and summarize([]).mean is None
    assert compare([1.0], [2.0, 2.1]).verdict == "cannot tell (1 seed)"
    assert compare([1.0, 1.0], [2.0, 2.0]).verdict == "cannot tell (no seed spread)"
    assert compare([1.0, 1.01], [2.0, 2.01]).verdict == "differs"
    assert compare([1.0, 2.0], [1.1, 2.1]).verdict == "within seed noise"
    assert compare([1.0, 2.0, float("nan")], [1.1, 2.1]).test is not None  # non-finite seeds are dropped
