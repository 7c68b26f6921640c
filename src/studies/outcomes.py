"""How a run ended, as the report counts it.

* ``ok`` — completed, with a validation result;
* ``no validation`` — completed before its first validation (``trainer.max_steps`` below
  ``val_check_interval``): nothing to select on, but its test metrics still count;
* ``diverged`` — a non-finite loss, and only that: the run was stopped for a NaN/inf loss
  (``reliability.nonfinite``), a logged training or validation loss is NaN/inf, or a final loss
  is (``metrics.json`` writes non-finite numbers as ``null``: the key is there, the value is not;
  a literal ``NaN`` or ``Infinity``, which Python's json reads as a float, is the same outcome).
  A high but finite loss is a result, reported as such;
* ``failed`` — ``metrics.json`` says failed for another reason (the error is listed);
* ``incomplete`` — no ``metrics.json``: interrupted, or still running.
"""

from __future__ import annotations

import math

from src.runs.divergence import is_divergence
from src.studies.runs import RunRecord

OUTCOMES = ("ok", "no validation", "diverged", "failed", "incomplete")
FINAL_LOSSES = ("val/loss", "test/loss", "train/loss")


def _finite(value: object) -> bool:
    """A final loss that is a number: not ``null``, ``NaN`` or ``±Infinity`` (nor text)."""
    try:
        return value is not None and not isinstance(value, bool) and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def run_outcome(run: RunRecord) -> str:
    """ok | no validation | diverged | failed | incomplete (module docstring)."""
    if run.status == "incomplete":
        return "incomplete"
    metrics = run.metrics or {}
    if run.status != "completed":
        return "diverged" if is_divergence(metrics.get("error")) else "failed"
    if any(k in metrics and not _finite(metrics[k]) for k in FINAL_LOSSES):
        return "diverged"
    if any(not math.isfinite(p.value) for p in [*run.train_history, *run.val_history]):
        return "diverged"
    if run.metric("val/loss") is None and not run.val_history:
        return "no validation"
    return "ok"
