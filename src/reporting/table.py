"""One row per variant: the figures of ``python -m src.report``, summarised over seeds.

Outcome of a run (the ``status`` column counts them):

* ``ok`` — completed with a finite final validation loss;
* ``diverged`` — the loss blew up: non-finite (or the run was stopped for a NaN/inf loss), or
  the final validation loss is above the first logged training loss (worse than at
  initialisation), or more than ``BLOWUP`` × the run's best validation loss;
* ``failed`` — ``metrics.json`` says ``failed`` for another reason (the error is listed);
* ``incomplete`` — no ``metrics.json``: interrupted, or still running.

Means and standard deviations (sample std, n-1) use the finite values of completed runs,
diverged ones included, so a variant that blew up in one seed shows it in its spread.
"""
from __future__ import annotations

import fnmatch
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from src.reporting.stats import Comparison, Summary, compare, summarize
from src.reporting.sweep import RunRecord, Variant, finite

BLOWUP = 1.5
OUTCOMES = ("ok", "diverged", "failed", "incomplete")
#: Extra metrics shown when runs have them (fnmatch patterns over metrics.json keys).
DEFAULT_EXTRA = ("test/loss", "extrapolation/ppl@*", "*/bleu", "*/chrf")


def run_outcome(run: RunRecord, metric: str = "val/loss") -> str:
    """ok | diverged | failed | incomplete (module docstring)."""
    if run.status == "incomplete":
        return "incomplete"
    if run.status != "completed":
        error = str((run.metrics or {}).get("error") or "").lower()
        return "diverged" if any(w in error for w in ("nonfinite", "non-finite", "nan", "inf loss")) else "failed"
    final = run.metric(metric)
    if final is None or not math.isfinite(final):
        return "diverged"
    first_train = next((p.value for p in run.train_history if math.isfinite(p.value)), None)
    best = min(finite([p.value for p in run.val_history] + [run.metric(f"{metric}_best")]), default=None)
    if first_train is not None and final > first_train:
        return "diverged"
    if best is not None and best > 0 and final > BLOWUP * best:
        return "diverged"
    return "ok"


@dataclass
class VariantRow:
    """Everything the report says about one variant."""

    variant: Variant
    label: str
    outcomes: Counter
    short: str  # the label with keys shortened to their last part (n_layer=6, lr=0.01), for legends
    loss: Summary  # final validation loss (the tested metric)
    ppl: Summary
    best_loss: Summary
    best_steps: list[int | None]
    params: Summary
    reference_params: int | None
    tokens: Summary
    throughput: Summary
    wall: Summary
    extra: dict[str, Summary] = field(default_factory=dict)
    comparison: Comparison | None = None  # vs the baseline (None for the baseline itself)
    errors: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        parts = [f"{self.outcomes[o]} {o}" for o in OUTCOMES if self.outcomes.get(o)]
        return ", ".join(parts)


def _values(runs: Sequence[RunRecord], key: str, completed_only: bool = True) -> list[float]:
    return finite(r.metric(key) for r in runs if not completed_only or r.status == "completed")


def metric_values(variant: Variant, metric: str) -> list[float]:
    """The finite final values of ``metric`` of the variant's completed runs (for tests)."""
    return _values(variant.runs, metric)


def extra_keys(runs: Sequence[RunRecord], patterns: Sequence[str] = DEFAULT_EXTRA) -> list[str]:
    """metrics.json keys matching ``patterns`` that hold a number (or null: reported as not
    applicable) in at least one run, in pattern order."""
    keys: list[str] = []
    for pat in patterns:
        found = sorted({k for r in runs for k, v in (r.metrics or {}).items()
                        if fnmatch.fnmatch(k, pat) and (v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)))},
                       key=_natural)
        keys += [k for k in found if k not in keys]
    return keys


def _natural(key: str) -> tuple[Any, ...]:
    """'ppl@4x' after 'ppl@2x' (numbers compared as numbers)."""
    import re

    return tuple(float(t) if t.replace(".", "", 1).isdigit() else t for t in re.split(r"(\d+(?:\.\d+)?)", key))


def short_label(variant: Variant, keys: Sequence[str]) -> str:
    """``model.n_layer=6, optim.lr=0.01`` -> ``n_layer=6, lr=0.01`` (full keys when shortening is ambiguous)."""
    short = [k.replace("/", ".").split(".")[-1] for k in keys]
    if len(set(short)) < len(short):
        return variant.label(keys)
    d = variant.values()
    return ", ".join(f"{s}={d[k]}" for s, k in zip(short, keys) if k in d) or "(defaults)"


def build_rows(variants: Sequence[Variant], varying: Sequence[str], *, metric: str = "val/loss",
               baseline: int = 0, alpha: float = 0.05, extra: Sequence[str] = ()) -> list[VariantRow]:
    """Summaries per variant and the comparison of each with ``variants[baseline]``."""
    rows: list[VariantRow] = []
    ppl_key = metric.replace("loss", "ppl") if "loss" in metric else None
    for v in variants:
        runs = v.runs
        outcomes = Counter(run_outcome(r, metric) for r in runs)
        loss_vals = _values(runs, metric)
        if ppl_key:
            ppl_vals = [r.metric(ppl_key) if r.metric(ppl_key) is not None else
                        (math.exp(min(r.metric(metric), 50.0)) if r.metric(metric) is not None else None)  # type: ignore[arg-type]
                        for r in runs if r.status == "completed"]
        else:
            ppl_vals = []
        refs = {r.match.get("reference_params") for r in runs if r.match}
        rows.append(VariantRow(
            variant=v, label=v.label(varying), outcomes=outcomes, short=short_label(v, varying),
            loss=summarize(loss_vals), ppl=summarize(ppl_vals),
            best_loss=summarize(_values(runs, f"{metric}_best")),
            best_steps=[int(r.metric("best_step")) if r.metric("best_step") is not None else None for r in runs
                        if r.status == "completed"],
            params=summarize(_values(runs, "params", completed_only=False)),
            reference_params=int(next(iter(refs))) if len(refs) == 1 and None not in refs else None,
            tokens=summarize(_values(runs, "tokens_seen")),
            throughput=summarize(_values(runs, "throughput_tokens_per_s")),
            wall=summarize(_values(runs, "wall_time_s", completed_only=False)),
            extra={k: summarize(_values(runs, k)) for k in extra},
            errors=[f"{r.path.name}: {(r.metrics or {}).get('error')}" for r in runs
                    if r.status == "failed" and (r.metrics or {}).get("error")],
        ))
    if rows and 0 <= baseline < len(rows):
        ref = _values(variants[baseline].runs, metric)
        for i, row in enumerate(rows):
            if i != baseline:
                row.comparison = compare(_values(row.variant.runs, metric), ref, alpha)
    return rows


@dataclass
class PairResult:
    a: str
    b: str
    comparison: Comparison


def pairwise(rows: Sequence[VariantRow], metric: str = "val/loss", alpha: float = 0.05,
             varying: Sequence[str] = ()) -> list[PairResult]:
    """Pairs of variants compared (no multiple-comparison correction; the report says so). With
    ``varying`` keys, only pairs that differ in exactly one of them (one factor at a time)."""
    out: list[PairResult] = []
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            if varying:
                a, b = rows[i].variant.values(), rows[j].variant.values()
                if sum(a.get(k) != b.get(k) for k in varying) != 1:
                    continue
            c = compare(_values(rows[j].variant.runs, metric), _values(rows[i].variant.runs, metric), alpha)
            out.append(PairResult(rows[i].label, rows[j].label, c))
    return out
