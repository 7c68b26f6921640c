"""Comparisons a report makes, corrected together, and their verdicts.

Every comparison is one variant against a reference variant on one metric (the primary metric
and each secondary one), tested on the per-seed final values (``src.reporting.stats``):

* **paired** (``scipy.stats.ttest_rel``) when both sides ran the same seeds, each once, on the same
  data order (``same_data``: the batches are a pure function of seed, rank and batch index, so the
  same seed, block size and batch size mean the same batches). Each comparison records its test,
  its number of pairs and the correlation between the paired runs;
* **Welch's** test otherwise, with the reason it could not pair (``pairing_note``).
  ``pairing="paired"`` or ``"unpaired"`` (``python -m src.report --pairing``) overrides the choice;
  ``paired`` still needs two shared seeds, and says so when it falls back.

The report corrects *all* of them together — the family is every comparison it prints:

* ``p_holm`` — Holm's step-down adjustment (Holm 1979) of the p-values of the family (whichever test
  made each): sort the m p-values, ``p̃_(i) = max_{j <= i} min(1, (m - j + 1) · p_(j))``; it
  controls the family-wise error rate at α under any dependence between the tests;
* ``p_tost_holm`` — the same adjustment over the family's equivalence (TOST) p-values.

Verdicts, at level α (default 0.05):

* ``better`` / ``worse`` — ``p_holm < α``, by the sign of Δ and the metric's direction (lower
  is better for losses and perplexities, higher for BLEU, chrF, accuracy). A metric with no
  direction (a gradient-norm ratio) says ``higher`` / ``lower`` instead;
* ``equivalent`` — not different, and TOST rejects ``|Δ| >= margin`` (``p_tost_holm < α``);
  only with a margin (``report.equivalence_margin``, in the metric's units);
* ``inconclusive`` — neither: the data cannot tell (the reason says why when there is no test).

The minimum detectable effect (``mde``) is computed at α/m, the level Holm's first step applies,
with 80 % power and the observed spreads: a true |Δ| below it is likely to be missed.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from src.reporting.stats import (
    minimum_detectable_effect,
    paired_minimum_detectable_effect,
    paired_t_test,
    paired_tost,
    summarize,
    tost,
    welch_t_test,
)

VERDICTS = ("better", "worse", "equivalent", "inconclusive")
PAIRINGS = ("auto", "paired", "unpaired")
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
    test: str = ""  # "paired" | CONSTANT | "welch" ("" without a test)
    pairs: int = 0  # seeds both sides share (the paired test's n)
    correlation: float | None = None  # of the paired runs' values
    pairing_note: str = ""  # why the comparison is not paired (auto), or why "paired" fell back
    values: tuple[list[float], list[float]] = field(default_factory=lambda: ([], []), repr=False)


#: the paired comparison when every seed shows the same difference: the t-test's limit
#: (docs/studies.md, "The statistics")
CONSTANT = "paired, no spread"


def constant_difference(a: Sequence[float], b: Sequence[float]) -> float | None:
    """The one value of ``a[i] - b[i]`` when at least 2 pairs all share it (exactly), else None."""
    if len(a) < 2 or len(a) != len(b):
        return None
    d = {float(x) - float(y) for x, y in zip(a, b)}
    return d.pop() if len(d) == 1 else None


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
) -> Comparison:
    """The unadjusted comparison (``decide`` adds the family's corrections and the verdict).

    seeds: the seed of each value of ``a`` and of ``b`` (same order); with them, and ``same_data``
    (both sides read the same batches for a seed), the comparison is paired by seed (module doc)."""
    if pairing not in PAIRINGS:
        raise ValueError(f"pairing={pairing!r}: use one of {', '.join(PAIRINGS)}")
    sa, sb = summarize(a), summarize(b)
    xa = [float(x) for x in a if x is not None and np.isfinite(x)]
    xb = [float(x) for x in b if x is not None and np.isfinite(x)]
    delta = sa.mean - sb.mean if sa.mean is not None and sb.mean is not None else None
    c = Comparison(metric, variant, reference, (sa.n, sb.n), delta, margin=margin, values=(xa, xb))
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
        test = paired_t_test(pa, pb)
        if test is not None:
            c.test, c.pairs, c.correlation, c.values = "paired", test.n, test.correlation, (pa, pb)
            c.p, c.delta_ci_low, c.delta_ci_high = test.p, test.ci_low, test.ci_high
            c.p_tost = paired_tost(pa, pb, margin) if margin else None
            return c
        same = constant_difference(pa, pb)
        # every seed the same difference (a saturated metric: exact match 1.00 vs 0.00)
        if same is not None:
            c.test, c.pairs, c.values = CONSTANT, len(pa), (pa, pb)
            # scipy's ttest_rel: t = ±inf, p = 0; no difference at all: p = 1
            c.p = 0.0 if same != 0 else 1.0
            c.delta_ci_low = c.delta_ci_high = same
            # TOST's limit: t = ±inf
            c.p_tost = (0.0 if abs(same) < margin else 1.0) if margin else None
            return c
        c.pairing_note = "the paired differences have no spread"
    if min(sa.n, sb.n) < 2:
        c.reason = f"{min(sa.n, sb.n)} seed{'s' if min(sa.n, sb.n) != 1 else ''} on one side"
        return c
    test = welch_t_test(xa, xb)
    if test is None:
        c.reason = "no seed spread"
        return c
    c.test = "welch"
    c.p, c.delta_ci_low, c.delta_ci_high = test.p, test.ci_low, test.ci_high
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


def decide(comparisons: Sequence[Comparison], alpha: float = 0.05) -> int:
    """Holm over the family, the MDE at α/m and the verdict of each comparison, in place.
    Returns m, the number of tested comparisons."""
    tested = [c for c in comparisons if c.p is not None]
    m = len(tested)
    for c, ph in zip(tested, holm([c.p for c in tested])):  # type: ignore[misc]
        c.p_holm = ph
    with_margin = [c for c in tested if c.p_tost is not None]
    for c, ph in zip(with_margin, holm([c.p_tost for c in with_margin])):  # type: ignore[misc]
        c.p_tost_holm = ph
    for c in comparisons:
        c.verdict = "inconclusive"
        if c.p is None:
            continue
        mde = paired_minimum_detectable_effect if c.test == "paired" else minimum_detectable_effect
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
    return m
