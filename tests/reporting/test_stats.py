"""The report's statistics against known answers: hand computations, Student's t tables,
published power figures and a published Holm example."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from src.reporting.comparisons import IDENTICAL, compare, decide, direction, holm, margin_for
from src.reporting.stats import minimum_detectable_effect, power_at, summarize, tost, welch_t_test


def test_welch_matches_hand_computation() -> None:
    a, b = [1.0, 2.0, 3.0], [4.0, 5.0, 7.5]
    va, vb = 1.0 / 3, 3.25 / 3  # s²/n with sample variances (ddof=1) 1 and 3.25
    t = (2.0 - 5.5) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 2)
    r = welch_t_test(a, b)
    assert r is not None
    assert r.t == pytest.approx(t) and r.df == pytest.approx(df)
    assert 0.05 < r.p < 0.07
    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)  # the interval of the difference, by hand
    assert (r.ci_low, r.ci_high) == (pytest.approx(-3.5 - half), pytest.approx(-3.5 + half))


# Student's t, two-sided 5%, df 2 and 10
@pytest.mark.parametrize(("n", "t_crit"), [(2, 4.303), (6, 2.228)])
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


def test_t_interval_against_the_t_table() -> None:
    xs = [2.31, 2.45, 2.28, 2.50, 2.39, 2.41]  # n = 6: t_{0.975, 5} = 2.571 (Student's t table)
    s = summarize(xs)
    mean, sd = sum(xs) / 6, float(np.std(xs, ddof=1))
    assert (s.mean, s.std, s.n) == (pytest.approx(mean), pytest.approx(sd), 6)
    half = 2.571 * sd / math.sqrt(6)
    assert s.ci_low == pytest.approx(mean - half, abs=1e-4) and s.ci_high == pytest.approx(
        mean + half, abs=1e-4
    )
    # scipy's own, on the same numbers
    lo, hi = stats.t.interval(0.95, 5, loc=mean, scale=sd / math.sqrt(6))
    assert (s.ci_low, s.ci_high) == (pytest.approx(lo), pytest.approx(hi))
    # no spread: the mean itself
    assert summarize([3.0]).ci_low is None and summarize([3.0, 3.0]).ci_low == 3.0


def test_tost_is_two_one_sided_welch_tests() -> None:
    a, b, margin = [2.01, 2.03, 1.99, 2.02, 2.00], [2.00, 2.02, 2.01, 1.98, 2.03], 0.05
    va, vb = np.var(a, ddof=1) / 5, np.var(b, ddof=1) / 5
    se, d = math.sqrt(va + vb), np.mean(a) - np.mean(b)
    df = (va + vb) ** 2 / (va**2 / 4 + vb**2 / 4)
    p_lower = stats.t.sf((d + margin) / se, df)  # H0: Δ <= -margin
    p_upper = stats.t.cdf((d - margin) / se, df)  # H0: Δ >= +margin
    p = tost(a, b, margin)
    assert p == pytest.approx(max(p_lower, p_upper)) and p < 0.01  # equivalent within ±0.05
    # a shift near the margin: not shown equivalent
    assert tost([x + 0.04 for x in a], b, margin) > 0.05
    assert tost(a, b, 0.0) is None and tost([1.0], b, margin) is None


def test_power_matches_published_figures() -> None:
    """Two-sample t-test, α = 0.05 two-sided (Cohen 1988; R pwr.t.test): d = 0.8 with n = 26 per
    group has power 0.8075, d = 0.5 with n = 64 per group 0.8015."""
    assert power_at(0.8, math.sqrt(2 / 26), 50, 0.05) == pytest.approx(0.8074866, abs=1e-6)
    assert power_at(0.5, math.sqrt(2 / 64), 126, 0.05) == pytest.approx(0.8014596, abs=1e-6)


def test_minimum_detectable_effect() -> None:
    base = np.array([-1.0, 1.0] * 13)
    base /= base.std(ddof=1)  # n = 26, sd = 1 per side
    mde = minimum_detectable_effect(base, base + 5.0)  # the spreads, not the means, set it
    # just below d = 0.8, which has power 0.807 at n = 26
    assert mde is not None and 0.78 < mde < 0.8
    assert power_at(mde, math.sqrt(2 / 26), 50, 0.05) == pytest.approx(0.8, abs=1e-9)
    big = np.array([-1.0, 1.0] * 500)
    se = math.sqrt(2 * big.var(ddof=1) / 1000)
    # normal limit
    assert minimum_detectable_effect(big, big) == pytest.approx(
        (1.959964 + 0.841621) * se, rel=2e-3
    )
    # no spread: nothing to base it on
    assert minimum_detectable_effect([1.0, 1.0], [2.0, 2.0]) is None


def test_holm_on_published_examples() -> None:
    # Holm-Bonferroni worked example (Wikipedia, "Holm–Bonferroni method", Example): p = .01, .04, .03, .005 at α = .05
    # rejects H4 and H1 only; adjusted p-values 0.03, 0.06, 0.06, 0.02
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # R: p.adjust(c(0.01, 0.02, 0.03, 0.04, 0.05), "holm")
    assert holm([0.01, 0.02, 0.03, 0.04, 0.05]) == pytest.approx([0.05, 0.08, 0.09, 0.09, 0.09])
    assert holm([0.5, 0.9]) == [1.0, 1.0] and holm([]) == []


def test_verdicts() -> None:
    tight = [2.00, 2.01, 1.99, 2.00, 2.01]
    comps = [
        compare("test/loss", "worse one", "base", [x + 0.3 for x in tight], tight, margin=0.02),
        compare("test/loss", "better one", "base", [x - 0.3 for x in tight], tight, margin=0.02),
        compare("test/loss", "same", "base", [x + 0.001 for x in tight], tight, margin=0.02),
        compare("test/loss", "noisy", "base", [1.5, 2.6, 2.0, 1.2, 2.9], tight, margin=0.02),
        compare("translation/bleu", "higher bleu", "base", [x + 5 for x in tight], tight),
        compare(
            "grad_norm/decoder.ffn.last_over_first", "ratio", "base", [x + 1 for x in tight], tight
        ),
        compare("test/loss", "one seed", "base", [2.0], tight, margin=0.02),
    ]
    sizes = decide(comps, alpha=0.05)
    # a family per metric (none is declared primary); the one-seed comparison has no test
    assert sizes == {
        "test/loss": 4,
        "translation/bleu": 1,
        "grad_norm/decoder.ffn.last_over_first": 1,
    }
    assert [c.verdict for c in comps] == [
        "worse",
        "better",
        "equivalent",
        "inconclusive",
        "better",
        "higher",
        "inconclusive",
    ]
    assert comps[-1].reason == "1 seed on one side" and comps[-1].p_holm is None
    # Holm within the test/loss family
    family = [c for c in comps if c.metric == "test/loss"]
    assert comps[0].p_holm == pytest.approx(min(1.0, sorted_rank_p(family, comps[0])))
    # the t-tests' MDE; BLEU is bounded, so auto tests it by permutation (no MDE)
    assert comps[4].test == "permutation" and comps[4].mde is None
    assert all(c.mde is not None and c.mde > 0 for c in comps[:4] + comps[5:6])
    assert (
        direction("test/loss") == "lower"
        and direction("val/acc") == "higher"
        and direction("grad_norm/x") is None
    )
    assert (
        margin_for("test/loss", 0.02, "test/loss") == 0.02
        and margin_for("translation/bleu", 0.02, "test/loss") is None
    )
    assert margin_for("translation/bleu", {"*/bleu": 0.5}, "test/loss") == 0.5


def sorted_rank_p(comps: list, c) -> float:
    """Holm's adjusted p of ``c`` by the definition (max over the ranks up to its own)."""
    ps = sorted(x.p for x in comps if x.p is not None)
    m, k = len(ps), ps.index(c.p)
    return max((m - j) * ps[j] for j in range(k + 1))


# ---------------------------------------------------------------- the paired design (same seeds, same batches)
def test_paired_test_is_scipys_ttest_rel_and_its_tost_and_mde_match_hand_computations() -> None:
    from scipy import optimize
    from scipy import stats as st

    from src.reporting.stats import paired_minimum_detectable_effect, paired_t_test, paired_tost

    a = [2.31, 2.45, 2.28, 2.52, 2.40]
    b = [2.35, 2.50, 2.30, 2.58, 2.43]
    d = np.subtract(a, b)
    test = paired_t_test(a, b)
    ref = st.ttest_rel(a, b)
    assert (
        test is not None
        and test.p == pytest.approx(ref.pvalue)
        and test.t == pytest.approx(ref.statistic)
    )
    n, se = len(d), np.std(d, ddof=1) / math.sqrt(len(d))
    half = st.t.ppf(0.975, n - 1) * se
    assert (test.ci_low, test.ci_high) == (
        pytest.approx(d.mean() - half),
        pytest.approx(d.mean() + half),
    )
    assert (
        test.n == 5 and test.df == 4 and test.correlation == pytest.approx(np.corrcoef(a, b)[0, 1])
    )
    # TOST by hand: the two one-sided tests on the differences, H0 Δ <= -m and H0 Δ >= +m
    m = 0.1
    lower = st.t.sf((d.mean() + m) / se, n - 1)
    upper = st.t.cdf((d.mean() - m) / se, n - 1)
    assert paired_tost(a, b, m) == pytest.approx(max(lower, upper))
    # MDE by hand: the root of the noncentral-t power at n - 1 df and the differences' standard error
    crit = st.t.ppf(1 - 0.05 / 2, n - 1)
    power = lambda e: st.nct.sf(crit, n - 1, e / se) + st.nct.cdf(-crit, n - 1, e / se)  # noqa: E731
    assert paired_minimum_detectable_effect(a, b) == pytest.approx(
        optimize.brentq(lambda e: power(e) - 0.8, 0, 6 * se), rel=1e-6
    )
    assert paired_t_test([1.0, 2.0], [0.5, 1.5]) is None  # no spread in the differences: no test


def _seeded_sweep(root, seeds_a, seeds_b, offset, delta, data_b=None):  # noqa: ANN001, ANN202
    """Two variants whose test loss = a per-seed offset (shared: the same batches) + their own effect + small noise."""
    from tests.reporting.fake_runs import completed, write_run

    noise = {1: 0.004, 2: -0.003, 3: 0.001, 4: -0.002, 5: 0.0}
    for ffn, seeds, effect in (("gelu", seeds_a, 0.0), ("swiglu", seeds_b, delta)):
        for s in seeds:
            v = 2.0 + offset[s] + effect + (noise[s] if ffn == "swiglu" else 0.0)
            config = {"data": data_b} if (ffn == "swiglu" and data_b) else {}
            write_run(
                root, [f"model/ffn={ffn}", f"seed={s}"], config=config, metrics=completed(v, v)
            )
    return root


def test_a_shared_per_seed_offset_cancels_in_the_paired_test(tmp_path) -> None:  # noqa: ANN001
    from scipy import stats as st

    from src.reporting.build import make_report

    offset = {
        1: 0.00,
        2: 0.15,
        3: -0.12,
        4: 0.08,
        5: -0.05,
    }  # seed noise far larger than the effect
    sweep = _seeded_sweep(tmp_path / "sweep", [1, 2, 3, 4, 5], [1, 2, 3, 4, 5], offset, delta=-0.03)
    files = make_report([sweep], tmp_path / "out", baseline="model/ffn=gelu")
    c = files.report.rows[[r.label for r in files.report.rows].index("model/ffn=swiglu")].comparison
    a = [
        2.0 + offset[s] - 0.03 + {1: 0.004, 2: -0.003, 3: 0.001, 4: -0.002, 5: 0.0}[s]
        for s in range(1, 6)
    ]
    b = [2.0 + offset[s] for s in range(1, 6)]
    welch = st.ttest_ind(a, b, equal_var=False).pvalue
    assert c.test == "paired" and c.pairs == 5 and c.correlation > 0.99
    # Welch sees only seed noise
    assert c.p == pytest.approx(st.ttest_rel(a, b).pvalue) and c.p < 1e-3 < 0.5 < welch
    assert c.verdict == "better"
    md = files.markdown.read_text()
    assert "paired t-test" in md and "| model/ffn=swiglu | model/ffn=gelu | paired | 5 |" in md


def test_mismatched_seeds_or_batches_fall_back_to_welch_and_say_why(tmp_path) -> None:  # noqa: ANN001
    from scipy import stats as st

    from src.reporting.build import make_report

    offset = {1: 0.00, 2: 0.15, 3: -0.12, 4: 0.08, 5: -0.05}
    sweep = _seeded_sweep(tmp_path / "seeds", [1, 2, 3], [3, 4, 5], offset, delta=-0.03)
    c = make_report([sweep], tmp_path / "out1", baseline="model/ffn=gelu").report.comparisons[0]
    a = [2.0 + offset[s] - 0.03 + {3: 0.001, 4: -0.002, 5: 0.0}[s] for s in (3, 4, 5)]
    b = [2.0 + offset[s] for s in (1, 2, 3)]
    assert c.test == "welch" and c.p == pytest.approx(st.ttest_ind(a, b, equal_var=False).pvalue)
    assert "seeds differ" in c.pairing_note and "1" in c.pairing_note and "5" in c.pairing_note
    # forced: paired on the one shared seed is not possible, and it says so
    forced = make_report(
        [sweep], tmp_path / "out2", baseline="model/ffn=gelu", pairing="paired"
    ).report.comparisons[0]
    assert forced.test == "welch" and "1 shared seed" in forced.pairing_note
    # the same seeds but another block size: other batches, so no pairing
    other = _seeded_sweep(tmp_path / "data", [1, 2, 3], [1, 2, 3], offset, delta=-0.03)
    for run in (other).glob("model.ffn=swiglu*"):
        cfg = run / ".hydra" / "config.yaml"
        cfg.write_text(cfg.read_text() + "block_size: 64\n")
    c = make_report([other], tmp_path / "out3", baseline="model/ffn=gelu").report.comparisons[0]
    assert c.test == "welch" and "different batches" in c.pairing_note


def test_a_saturated_metric_takes_the_exact_sign_flip_test() -> None:
    """Exact match 1.00 on every seed against 0.00: the paired differences have no spread, so auto
    takes the sign-flip test, whose smallest p on 5 pairs is 2/2^5 = 0.0625: no Holm family can
    reach α = 0.05 with it, and the verdict says so (with the seeds that could). Both 0.00 on every
    seed is identical by construction: no test, no family. Unpaired, the same values get the
    two-sample permutation test (smallest p 2/C(10, 5))."""
    seeds = ([1, 2, 3, 4, 5], [1, 2, 3, 4, 5])
    comps = [
        compare(
            "test/exact_match", "solves", "base", [1.0] * 5, [0.0] * 5, margin=0.05, seeds=seeds
        ),
        compare(
            "test/exact_match", "both fail", "base", [0.0] * 5, [0.0] * 5, margin=0.05, seeds=seeds
        ),
        compare(
            "test/exact_match", "off by 0.1", "base", [0.1] * 5, [0.0] * 5, margin=0.05, seeds=seeds
        ),
        compare("test/exact_match", "unpaired", "base", [1.0] * 5, [0.0] * 5, margin=0.05),
    ]
    sizes = decide(comps)
    solves, fail, off, unpaired = comps
    assert sizes == {"test/exact_match": 3}
    assert solves.test == "sign-flip" and solves.p == pytest.approx(0.0625)
    assert solves.test_why == "bounded metric" and solves.p_floor == pytest.approx(0.0625)
    assert (solves.delta_ci_low, solves.delta_ci_high, solves.pairs) == (1.0, 1.0, 5)
    assert solves.verdict == "no verdict" and off.verdict == "no verdict"
    # 2 / 2^n < 0.05 / 3 first at n = 7
    assert "no verdict possible at n = 5" in solves.reason and "7 seeds" in solves.reason
    assert fail.family == IDENTICAL and fail.verdict == IDENTICAL and fail.p is None
    assert unpaired.test == "permutation" and unpaired.p == pytest.approx(2 / 252)
    assert unpaired.p_holm == pytest.approx(3 * 2 / 252) and unpaired.verdict == "better"


def test_protocol_test_t_on_constant_differences_has_no_test() -> None:
    """Under protocol.test=t a constant paired difference leaves the t-test undefined: no p (the
    old 'paired, no spread' p = 0 is gone), and the reason names the tests that apply."""
    seeds = ([1, 2, 3], [1, 2, 3])
    c = compare("test/loss", "a", "b", [2.0, 2.1, 2.2], [1.9, 2.0, 2.1], seeds=seeds, test="t")
    assert c.p is None and c.test == "" and "protocol.test=auto or permutation" in c.reason


def test_no_test_says_whether_runs_are_missing_or_their_numbers_are() -> None:
    """A tune-stage-only report has no verdict runs: that is the reason given, not 'no finite result', which is kept
    for runs that ended without a number (diverged)."""
    assert compare("test/loss", "a", "b", [], []).reason == "no verdict runs on either side"
    assert compare("test/loss", "a", "b", [], [1.0, 2.0]).reason == "no verdict runs on one side"
    nan = compare("test/loss", "a", "b", [float("nan"), None], [1.0, 2.0])
    assert nan.reason == "no finite result" and nan.test == "" and nan.p is None
