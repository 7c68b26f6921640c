"""Comparisons a report makes, their tests, their families and their verdicts.

Every comparison is one variant against a reference variant on one metric (the primary metric
and each secondary one), tested on the per-seed final values. Pairing:

* **paired** when both sides ran the same seeds, each once, on the same data order (``same_data``:
  the batches are a pure function of seed, rank and batch index, so the same seed, block size and
  batch size mean the same batches); each comparison records its number of pairs and the
  correlation between the paired runs;
* **unpaired** otherwise, with the reason it could not pair (``pairing_note``).
  ``pairing="paired"`` or ``"unpaired"`` (``python -m src.report --pairing``) overrides the choice;
  ``paired`` still needs two shared seeds, and says so when it falls back.

The test (``protocol.test``, ``choose_test``): ``t`` (the paired t-test or Welch's,
``src.reporting.stats``), ``permutation`` (the exact sign-flip test or the two-sample permutation
test, with BCa bootstrap intervals: ``src.reporting.resampling``) or ``auto``, which takes the
permutation test for a bounded metric (accuracy, exact match, BLEU: ``BOUNDED``), for values that
take at most two distinct values over three or more seeds, and for values or paired differences
without spread, and the t-test otherwise. Each comparison records its test and why
(``test_why``).

A pair that is identical by construction (paired, every seed the same value: the same
initialisation, a diagnostic the changed factor cannot reach) is not a test: its family is
``IDENTICAL`` and it enters no correction. "The same value" is to the last float32 bits
(``ULPS`` units in the last place: the metrics are float32 computations, and two runs may reach
the same number along different code paths).

Families (``family``): ``PRIMARY`` holds the study's declared questions (``protocol.primary``,
``src.reporting.families``); every other comparison is exploratory, in a family per metric. Holm's
step-down adjustment (Holm 1979) runs within each family: sort its m p-values,
``p̃_(i) = max_{j <= i} min(1, (m - j + 1) · p_(j))``; it controls the family-wise error rate at α
under any dependence between the tests. ``p_tost_holm``: the same over the family's equivalence
(TOST) p-values.

Verdicts, at level α (default 0.05):

* ``better`` / ``worse`` — ``p_holm < α``, by the sign of Δ and the metric's direction (lower
  is better for losses and perplexities, higher for BLEU, chrF, accuracy). A metric with no
  direction (a gradient-norm ratio) says ``higher`` / ``lower`` instead;
* ``equivalent`` — not different, and TOST rejects ``|Δ| >= margin`` (``p_tost_holm < α``);
  only with a margin (``report.equivalence_margin``, in the metric's units);
* ``no verdict`` — the exact test cannot reach α at these seeds: its smallest p (``p_floor``: 2/2^n
  for n pairs) times the family's size is at least α (``reason`` says how many seeds it needs);
* ``inconclusive`` — none of these: the data cannot tell (the reason says why when there is no
  test).

The minimum detectable effect (``mde``) of a t-tested comparison is computed at α/m, the level
Holm's first step applies in its family, with 80 % power and the observed spreads.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from src.reporting.resampling import (
    pairs_for_floor,
    permutation_test,
    permutation_tost,
    sign_flip_test,
    sign_flip_tost,
)
from src.reporting.stats import (
    minimum_detectable_effect,
    paired_minimum_detectable_effect,
    paired_t_test,
    paired_tost,
    summarize,
    tost,
    welch_t_test,
)

VERDICTS = ("better", "worse", "equivalent", "inconclusive", "no verdict")
PAIRINGS = ("auto", "paired", "unpaired")
TESTS = ("auto", "t", "permutation")
#: metrics that live in a bounded range: ``auto`` tests them by permutation
BOUNDED = ("*acc*", "*accuracy*", "*exact_match*", "*bleu*", "*chrf*", "*fraction*", "*rate")
PRIMARY = "primary"
IDENTICAL = "identical by construction"
LOWER_IS_BETTER = ("*loss*", "*ppl*", "*perplexity*", "*nll*", "*bpb*", "*bits_per*")
HIGHER_IS_BETTER = ("*bleu*", "*chrf*", "*acc*", "*accuracy*", "*exact_match*")


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the input order."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return [float(x) for x in out]


def direction(metric: str) -> str | None:
    """ "lower" | "higher" (which way is better) or None for a descriptive metric."""
    name = metric.lower()
    if any(fnmatch.fnmatch(name, pat) for pat in HIGHER_IS_BETTER):
        return "higher"
    if any(fnmatch.fnmatch(name, pat) for pat in LOWER_IS_BETTER):
        return "lower"
    return None


def margin_for(
    metric: str, margins: float | Mapping[str, float] | None, primary: str
) -> float | None:
    """The equivalence margin of ``metric``: one number is the primary metric's (the others have
    other units); a mapping gives metric names / fnmatch patterns their own."""
    if margins is None:
        return None
    if isinstance(margins, (int, float)):
        return float(margins) if metric == primary else None
    for pat, value in margins.items():
        if metric == pat or fnmatch.fnmatch(metric, pat):
            return None if value is None else float(value)
    return None


@dataclass
class Comparison:
    """``variant`` against ``reference`` on ``metric``: Δ = mean(variant) - mean(reference)."""

    metric: str
    variant: str
    reference: str
    n: tuple[int, int]  # finite values (variant, reference)
    delta: float | None
    delta_ci_low: float | None = None
    delta_ci_high: float | None = None
    p: float | None = None  # two-sided, by ``test``
    p_tost: float | None = None  # None without a margin
    margin: float | None = None
    p_holm: float | None = None
    p_tost_holm: float | None = None
    mde: float | None = None
    verdict: str = "inconclusive"
    reason: str = ""  # why there is no test
    test: str = ""  # "paired" | "welch" (t-tests) | "sign-flip" | "permutation" ("" without one)
    test_why: str = ""  # why this test (``choose_test``)
    p_floor: float | None = None  # the exact test's smallest possible p at these sample sizes
    exact: bool = True  # the permutation test enumerated every assignment
    family: str = ""  # PRIMARY | IDENTICAL | the metric (an exploratory family of its own)
    row: str = ""  # the row's id: a declared question's own, else "metric: variant vs reference"
    expect: str | None = None  # a declared question's expected direction
    interaction: bool = False  # a difference of differences (``src.reporting.families``)
    pairs: int = 0  # seeds both sides share (the paired test's n)
    correlation: float | None = None  # of the paired runs' values
    pairing_note: str = ""  # why the comparison is not paired (auto), or why "paired" fell back
    values: tuple[list[float], list[float]] = field(default_factory=lambda: ([], []), repr=False)


def row_id(metric: str, variant: str, reference: str) -> str:
    """An undeclared comparison's row id (``comparisons.csv``'s ``row``; claims name rows by it)."""
    return f"{metric}: {variant} vs {reference}"


#: metrics are float32 computations: two runs that compute the same number along different code
#: paths (another optimizer's parameter groups) may differ in its last float32 bits
ULPS = 4
FLOAT32_EPS = float(np.finfo(np.float32).eps)


def same_values(a: Sequence[float], b: Sequence[float]) -> bool:
    """Every pair equal to within ``ULPS`` float32 units in the last place: identical by
    construction."""
    return all(abs(x - y) <= ULPS * FLOAT32_EPS * max(abs(x), abs(y)) for x, y in zip(a, b))


def bounded(metric: str) -> bool:
    name = metric.lower()
    return any(fnmatch.fnmatch(name, pat) for pat in BOUNDED)


def choose_test(
    test: str, metric: str, a: Sequence[float], b: Sequence[float], paired: bool
) -> tuple[str, str]:
    """("t" | "permutation", why) for ``protocol.test`` on these values (module docstring)."""
    if test != "auto":
        return test, f"protocol.test={test}"
    if bounded(metric):
        return "permutation", "bounded metric"
    for side in (a, b):
        if len(side) >= 3 and len(set(side)) <= 2:
            return "permutation", "at most two distinct values over the seeds"
    if paired and np.ptp(np.subtract(a, b)) == 0:
        return "permutation", "the paired differences have no spread"
    if not paired and (np.ptp(a) == 0 or np.ptp(b) == 0):
        return "permutation", "a side has no spread over seeds"
    return "t", "unbounded metric with spread over seeds"


def compare(
    metric: str,
    variant: str,
    reference: str,
    a: Sequence[float | None],
    b: Sequence[float | None],
    margin: float | None = None,
    *,
    seeds: tuple[Sequence[Any], Sequence[Any]] | None = None,
    same_data: bool = True,
    pairing: str = "auto",
    test: str = "auto",
) -> Comparison:
    """The unadjusted comparison (``decide`` adds the family's corrections and the verdict).

    seeds: the seed of each value of ``a`` and of ``b`` (same order); with them, and ``same_data``
    (both sides read the same batches for a seed), the comparison is paired by seed (module doc).
    test: ``protocol.test`` (auto | t | permutation)."""
    if pairing not in PAIRINGS:
        raise ValueError(f"pairing={pairing!r}: use one of {', '.join(PAIRINGS)}")
    sa, sb = summarize(a), summarize(b)
    xa = [float(x) for x in a if x is not None and np.isfinite(x)]
    xb = [float(x) for x in b if x is not None and np.isfinite(x)]
    delta = sa.mean - sb.mean if sa.mean is not None and sb.mean is not None else None
    c = Comparison(metric, variant, reference, (sa.n, sb.n), delta, margin=margin, values=(xa, xb))
    c.row = row_id(metric, variant, reference)
    # no runs (a tune-stage-only report has no verdict runs), or none finished with a number
    if delta is None:
        c.reason = (
            "no verdict runs on either side"
            if not len(a) and not len(b)
            else "no verdict runs on one side"
            if not len(a) or not len(b)
            else "no finite result"
        )
        return c
    paired = _pairs(a, b, seeds, same_data, pairing, c) if pairing != "unpaired" else None
    if paired is not None:
        pa, pb = paired
        c.pairs, c.values = len(pa), (pa, pb)
        if same_values(pa, pb):  # nothing the changed factor reaches
            c.family, c.verdict = IDENTICAL, IDENTICAL
            c.reason = f"every one of the {len(pa)} seeds gives both sides the same value"
            return c
        kind, c.test_why = choose_test(test, metric, pa, pb, paired=True)
        if np.std(pa) > 0 and np.std(pb) > 0:
            c.correlation = float(np.corrcoef(pa, pb)[0, 1])
        if kind == "permutation":
            r = sign_flip_test(pa, pb)
            assert r is not None  # >= 2 pairs (_pairs)
            c.test, c.p, c.p_floor, c.exact = "sign-flip", r.p, r.p_floor, r.exact
            c.delta_ci_low, c.delta_ci_high = r.ci_low, r.ci_high
            c.p_tost = sign_flip_tost(pa, pb, margin) if margin else None
            return c
        t = paired_t_test(pa, pb)
        if t is not None:
            c.test, c.correlation = "paired", t.correlation
            c.p, c.delta_ci_low, c.delta_ci_high = t.p, t.ci_low, t.ci_high
            c.p_tost = paired_tost(pa, pb, margin) if margin else None
            return c
        c.reason = (
            "the paired differences have no spread: the t-test is undefined (protocol.test=auto "
            "or permutation tests them)"
        )
        return c
    if min(sa.n, sb.n) < 2:
        c.reason = f"{min(sa.n, sb.n)} seed{'s' if min(sa.n, sb.n) != 1 else ''} on one side"
        return c
    kind, c.test_why = choose_test(test, metric, xa, xb, paired=False)
    if kind == "permutation":
        r = permutation_test(xa, xb)
        assert r is not None  # >= 2 values a side (above)
        c.test, c.p, c.p_floor, c.exact = "permutation", r.p, r.p_floor, r.exact
        c.delta_ci_low, c.delta_ci_high = r.ci_low, r.ci_high
        c.p_tost = permutation_tost(xa, xb, margin) if margin else None
        return c
    w = welch_t_test(xa, xb)
    if w is None:
        c.reason = "no seed spread: the t-test is undefined (protocol.test=auto tests it)"
        return c
    c.test = "welch"
    c.p, c.delta_ci_low, c.delta_ci_high = w.p, w.ci_low, w.ci_high
    c.p_tost = tost(xa, xb, margin) if margin else None
    return c


def _pairs(
    a: Sequence[float | None],
    b: Sequence[float | None],
    seeds: tuple[Sequence[Any], Sequence[Any]] | None,
    same_data: bool,
    pairing: str,
    c: Comparison,
) -> tuple[list[float], list[float]] | None:
    """The values of ``a`` and ``b`` lined up by seed, or None (and ``c.pairing_note`` says why)."""
    if seeds is None:
        c.pairing_note = "no seeds given"
        return None
    by_a = [(s, float(x)) for s, x in zip(seeds[0], a) if x is not None and np.isfinite(x)]
    by_b = [(s, float(x)) for s, x in zip(seeds[1], b) if x is not None and np.isfinite(x)]
    da, db = dict(by_a), dict(by_b)
    if len(da) < len(by_a) or len(db) < len(by_b):
        c.pairing_note = "a seed appears more than once on one side"
        return None
    if not same_data and pairing == "auto":
        c.pairing_note = "the two sides read different batches for a seed (block_size, batch_size or data differ)"
        return None
    shared = sorted(set(da) & set(db), key=str)
    if pairing == "auto" and set(da) != set(db):
        only = sorted({str(s) for s in set(da) ^ set(db)})
        c.pairing_note = f"the seeds differ ({', '.join(only)} on one side only)"
        return None
    if len(shared) < 2:
        c.pairing_note = (
            f"{len(shared)} shared seed{'s' if len(shared) != 1 else ''}: pairing needs 2"
        )
        return None
    return [da[s] for s in shared], [db[s] for s in shared]


def families(comparisons: Sequence[Comparison]) -> dict[str, list[Comparison]]:
    """The families of ``comparisons``, the primary one first; identical pairs are in none."""
    out: dict[str, list[Comparison]] = {}
    for c in sorted(comparisons, key=lambda c: c.family != PRIMARY):
        if c.family != IDENTICAL:
            out.setdefault(c.family or c.metric, []).append(c)
    return out


def decide(comparisons: Sequence[Comparison], alpha: float = 0.05) -> dict[str, int]:
    """Holm within each family, the MDE at α/m and the verdict of each comparison, in place.
    Returns each family's m, its number of tested comparisons."""
    sizes: dict[str, int] = {}
    for name, family in families(comparisons).items():
        for c in family:
            c.family = name
        sizes[name] = _decide_family(family, alpha)
    return sizes


def _decide_family(family: Sequence[Comparison], alpha: float) -> int:
    tested = [c for c in family if c.p is not None]
    m = len(tested)
    for c, ph in zip(tested, holm([c.p for c in tested])):  # type: ignore[misc]
        c.p_holm = ph
    with_margin = [c for c in tested if c.p_tost is not None]
    for c, ph in zip(with_margin, holm([c.p_tost for c in with_margin])):  # type: ignore[misc]
        c.p_tost_holm = ph
    for c in family:
        c.verdict = "inconclusive"
        if c.p is None:
            continue
        if c.test in ("paired", "welch"):
            mde = (
                paired_minimum_detectable_effect
                if c.test == "paired"
                else minimum_detectable_effect
            )
            c.mde = mde(*c.values, alpha=alpha / max(m, 1))
        if c.p_holm is not None and c.p_holm < alpha and c.delta:
            way = direction(c.metric)
            up = c.delta > 0
            c.verdict = (
                ("higher" if up else "lower")
                if way is None
                else ("better" if up == (way == "higher") else "worse")
            )
        elif c.p_tost_holm is not None and c.p_tost_holm < alpha:
            c.verdict = "equivalent"
        elif (
            c.p_floor is not None
            and c.p_floor * m >= alpha
            # TOST's one-sided tests: half the two-sided floor, Holm over the margin's family
            and (c.p_tost is None or c.p_floor / 2 * len(with_margin) >= alpha)
        ):
            # Holm's smallest threshold is α/m: no p this test can give passes it
            c.verdict = "no verdict"
            need = pairs_for_floor(alpha / m) if c.test == "sign-flip" else None
            c.reason = (
                f"no verdict possible at n = {min(c.n)}: the exact test's smallest p, "
                f"{c.p_floor:.3g}, times the family's {m} test{'s' if m != 1 else ''} is not below "
                f"α = {alpha}" + (f"; {need} seeds per variant could reach it" if need else "")
            )
    return m
