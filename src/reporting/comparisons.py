"""Comparisons a report makes, corrected together, and their verdicts.

Every comparison is one variant against a reference variant on one metric (the primary metric
and each secondary one), tested on the per-seed final values (``src.reporting.stats``). The
report corrects *all* of them together — the family is every comparison it prints:

* ``p_holm`` — Holm's step-down adjustment (Holm 1979) of the Welch p-values of the family:
  sort the m p-values, ``p̃_(i) = max_{j <= i} min(1, (m - j + 1) · p_(j))``; it controls the
  family-wise error rate at α under any dependence between the tests;
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

import numpy as np

from src.reporting.stats import minimum_detectable_effect, summarize, tost, welch_t_test

VERDICTS = ("better", "worse", "equivalent", "inconclusive")
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
    """"lower" | "higher" (which way is better) or None for a descriptive metric."""
    name = metric.lower()
    if any(fnmatch.fnmatch(name, pat) for pat in HIGHER_IS_BETTER):
        return "higher"
    if any(fnmatch.fnmatch(name, pat) for pat in LOWER_IS_BETTER):
        return "lower"
    return None


def margin_for(metric: str, margins: float | Mapping[str, float] | None, primary: str) -> float | None:
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
    p: float | None = None  # Welch, two-sided
    p_tost: float | None = None  # None without a margin
    margin: float | None = None
    p_holm: float | None = None
    p_tost_holm: float | None = None
    mde: float | None = None
    verdict: str = "inconclusive"
    reason: str = ""  # why there is no test
    values: tuple[list[float], list[float]] = field(default_factory=lambda: ([], []), repr=False)


def compare(metric: str, variant: str, reference: str, a: Sequence[float | None], b: Sequence[float | None],
            margin: float | None = None) -> Comparison:
    """The unadjusted comparison (``decide`` adds the family's corrections and the verdict)."""
    sa, sb = summarize(a), summarize(b)
    xa = [float(x) for x in a if x is not None and np.isfinite(x)]
    xb = [float(x) for x in b if x is not None and np.isfinite(x)]
    delta = sa.mean - sb.mean if sa.mean is not None and sb.mean is not None else None
    c = Comparison(metric, variant, reference, (sa.n, sb.n), delta, margin=margin, values=(xa, xb))
    if delta is None:
        c.reason = "no finite result"
    elif min(sa.n, sb.n) < 2:
        c.reason = f"{min(sa.n, sb.n)} seed{'s' if min(sa.n, sb.n) != 1 else ''} on one side"
    else:
        test = welch_t_test(xa, xb)
        if test is None:
            c.reason = "no seed spread"
        else:
            c.p, c.delta_ci_low, c.delta_ci_high = test.p, test.ci_low, test.ci_high
            c.p_tost = tost(xa, xb, margin) if margin else None
    return c


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
        c.mde = minimum_detectable_effect(*c.values, alpha=alpha / max(m, 1))
        if c.p_holm is not None and c.p_holm < alpha and c.delta:
            way = direction(c.metric)
            up = c.delta > 0
            c.verdict = ("higher" if up else "lower") if way is None else ("better" if up == (way == "higher") else "worse")
        elif c.p_tost_holm is not None and c.p_tost_holm < alpha:
            c.verdict = "equivalent"
    return m
