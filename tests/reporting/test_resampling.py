"""The resampling tests (src/reporting/resampling.py) against scipy and hand enumeration, and the
test ``protocol.test=auto`` picks for each kind of metric."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from src.reporting.comparisons import choose_test, compare, decide
from src.reporting.resampling import (
    DRAWS,
    pairs_for_floor,
    permutation_test,
    sign_flip_floor,
    sign_flip_test,
    split_floor,
)


def _enumerated_sign_flip(d: np.ndarray) -> float:
    """P(|mean of the signed d| >= |mean(d)|) over all 2^n sign assignments."""
    observed = abs(d.mean())
    signs = itertools.product((-1.0, 1.0), repeat=d.size)
    hits = sum(abs((np.array(s) * d).mean()) >= observed * (1 - 1e-12) for s in signs)
    return hits / 2**d.size


@pytest.mark.parametrize("n", [5, 6, 8])
def test_sign_flip_is_scipys_permutation_test_and_the_enumeration(n: int) -> None:
    rng = np.random.default_rng(n)
    for _ in range(5):
        a, b = rng.normal(0.3, 1.0, n), rng.normal(0.0, 1.0, n)
        r = sign_flip_test(a, b)
        assert r is not None and r.exact
        scipy_p = stats.permutation_test(
            (a - b,), np.mean, permutation_type="samples", n_resamples=np.inf
        ).pvalue
        assert r.p == pytest.approx(scipy_p) and r.p == pytest.approx(_enumerated_sign_flip(a - b))


def test_five_pairs_never_go_below_the_floor() -> None:
    """2/2^5 = 0.0625: however large and consistent the differences, no lower p exists."""
    assert sign_flip_floor(5) == 0.0625
    rng = np.random.default_rng(0)
    for _ in range(50):
        d = rng.normal(rng.uniform(-3, 3), rng.uniform(0.01, 2), 5)
        r = sign_flip_test(d, np.zeros(5))
        assert r is not None and r.p >= 0.0625 - 1e-12
    r = sign_flip_test([1.0] * 5, [0.0] * 5)  # exact match 1.0 vs 0.0 on every seed
    assert r is not None and r.p == pytest.approx(0.0625) and (r.ci_low, r.ci_high) == (1.0, 1.0)
    # the pairs needed before any p can be below α/m
    assert pairs_for_floor(0.05) == 6 and pairs_for_floor(0.05 / 4) == 8


def test_two_sample_permutation_is_the_enumeration_of_splits() -> None:
    a, b = np.array([0.9, 1.2, 1.1]), np.array([0.2, 0.4, 0.1, 0.3])
    pooled, observed = np.concatenate([a, b]), a.mean() - b.mean()
    splits = list(itertools.combinations(range(7), 3))
    diffs = []
    for idx in splits:
        mask = np.zeros(7, bool)
        mask[list(idx)] = True
        diffs.append(pooled[mask].mean() - pooled[~mask].mean())
    # two-sided as scipy defines it: twice the smaller tail (the null is not symmetric for 3 vs 4)
    tol = 1e-12 * abs(observed)
    upper = np.mean([x >= observed - tol for x in diffs])
    lower = np.mean([x <= observed + tol for x in diffs])
    r = permutation_test(a, b)
    assert r is not None and r.exact and r.p == pytest.approx(min(1.0, 2 * min(upper, lower)))
    assert r.p_floor == pytest.approx(split_floor(3, 4)) == pytest.approx(2 / math.comb(7, 3))
    assert r.ci_low <= observed <= r.ci_high


def test_beyond_sixteen_pairs_it_draws_and_says_so() -> None:
    rng = np.random.default_rng(1)
    r = sign_flip_test(rng.normal(0.5, 1, 20), np.zeros(20))
    assert r is not None and not r.exact and r.draws == f"{DRAWS:,} random draws"


@pytest.mark.parametrize(
    "metric, a, b, paired, want",
    [
        ("test/exact_match", [0.4, 0.6, 0.5], [0.3, 0.2, 0.1], True, ("permutation", "bounded")),
        ("test/loss", [1.0, 2.0, 1.0, 2.0], [1.5, 1.4, 1.3, 1.2], False, ("permutation", "two")),
        ("test/loss", [2.0, 2.1, 2.2], [1.9, 2.0, 2.1], True, ("permutation", "no spread")),
        ("test/loss", [2.0, 2.0], [1.9, 2.0, 2.3], False, ("permutation", "no spread")),
        ("test/loss", [2.0, 2.13, 2.25], [1.9, 2.0, 2.3], True, ("t", "unbounded")),
    ],
)
def test_auto_takes_the_permutation_test_where_the_t_test_does_not_fit(
    metric: str, a: list[float], b: list[float], paired: bool, want: tuple[str, str]
) -> None:
    kind, why = choose_test("auto", metric, a, b, paired)
    assert kind == want[0] and want[1] in why
    assert choose_test("t", metric, a, b, paired) == ("t", "protocol.test=t")


def test_a_comparison_names_its_test_and_why_and_holm_applies_within_its_family() -> None:
    seeds = ([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 5, 6, 7, 8])
    hit = [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    miss = [0.0] * 8
    c = compare("test/acc", "a", "b", hit, miss, seeds=seeds)
    decide([c])
    d = np.subtract(hit, miss)
    want = stats.permutation_test(
        (d,), np.mean, permutation_type="samples", n_resamples=np.inf
    ).pvalue
    assert (c.test, c.test_why) == ("sign-flip", "bounded metric")
    assert c.p == pytest.approx(want) and c.p_holm == pytest.approx(want)
    assert c.verdict == "better"  # 7 of 8 seeds one way: p = 2 · 2/256 < 0.05


def test_plan_knows_the_exact_tests_floor() -> None:
    """--plan with 4 declared questions on a bounded metric: α/m = 0.0125, and 2/2^n first goes
    below it at n = 8, so no verdict is possible with fewer seeds; the t-test's plan has no floor."""
    from src.reporting.planning import pilot_plan
    from src.studies.protocol import Protocol

    questions = [
        {"id": f"q{i}", "variant": f"model/ffn=v{i}", "reference": "model/ffn=gelu"}
        for i in range(4)
    ]
    exact = Protocol.from_node({"metric": "test/exact_match", "primary": questions})
    plan = pilot_plan(["gelu", "a", "b", "c", "d", "e"], 0, 0.1, 0.05, protocol=exact)
    assert plan.family == 4 and plan.alpha == pytest.approx(0.0125)
    assert plan.floor_seeds == 8 and "bounded test/exact_match" in plan.floor_why
    assert "no verdict is possible with fewer than 8 seeds per variant" in plan.render()
    loss = Protocol.from_node({"metric": "test/loss", "primary": questions})
    plan = pilot_plan(["gelu", "a", "b", "c", "d", "e"], 0, 0.1, 0.05, protocol=loss)
    assert plan.floor_seeds is None and "sign-flip" not in plan.render()
