"""Evaluation-time variants (``python -m src.report --eval-variants``): a RoPE scaling applied at
evaluation time, reported as a variant of its own so that it can be compared like one.

The length-extrapolation callback scores a trained RoPE model at 1x, 2x … its training length
unscaled (``extrapolation/ppl@2x``) and with each scaling of ``scalings:``
(``extrapolation/yarn/ppl@2x``; docs/studies.md, "Length extrapolation"). For each scaling name
found in a variant's runs, every run of that variant gets a *derived run*: the same run (config,
seed, stage, path, histories) with one more override ``eval.rope_scaling=<name>``, so it groups
into a variant of its own, and these metrics:

* ``extrapolation/<rest>`` from the run's ``extrapolation/<name>/<rest>`` (ppl, loss, note, train
  length); at 1x the unscaled figure stays when the scaled one is absent; every other
  ``extrapolation/`` figure (unscaled or another scaling's) is dropped;
* ``test/*`` dropped: at the training length they are the parent's own numbers (a null final loss
  stays null: it is how the run's outcome knows it diverged);
* everything else kept (``val/*`` above all: the same weights, so selection on ``val/loss`` chooses
  the parent's value).

Every run of the variant is derived, not only those holding the scaling's figures: a seed that
diverged or failed has none, and leaving it out would let the derived variant's selection choose
another value than its parent's. A derived run shares its parent's seed and data order, so it pairs
with every variant by seed; it is compared only on the figures its scaling changed
(``changed_by_scaling``), never on numbers that repeat its parent's. The per-scaling secondary
metrics (``extrapolation/<name>/…``) leave the report (``without_scaled``): the derived variants
carry them."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from src.errors import ConfigError
from src.studies.outcomes import FINAL_LOSSES
from src.studies.runs import RunRecord, is_ignored

#: the override that makes an evaluation-time variant a variant of its own
EVAL_KEY = "eval.rope_scaling"
PREFIX = "extrapolation/"
SCALED = re.compile(r"^extrapolation/([^/]+)/ppl@[^/]+$")


def scaling_names(run: RunRecord) -> list[str]:
    """The scalings with at least one finite ``extrapolation/<name>/ppl@<f>x`` in the run's metrics,
    sorted."""
    names = set()
    for key in run.metrics or {}:
        m = SCALED.match(key)
        value = run.metric(key)
        if m and value is not None and math.isfinite(value):
            names.add(m.group(1))
    return sorted(names)


def scaled_metrics(metrics: dict[str, Any], name: str) -> dict[str, Any]:
    """``metrics`` as the derived run of scaling ``name`` holds them (module docstring)."""
    own = f"{PREFIX}{name}/"
    scaled = {PREFIX + k[len(own) :]: v for k, v in metrics.items() if k.startswith(own)}
    out: dict[str, Any] = {}
    for k, v in metrics.items():
        if k.startswith("test/") and not (k in FINAL_LOSSES and v is None):
            continue
        if k.startswith(PREFIX):
            rest = k[len(PREFIX) :]
            if "/" in rest or ("@" in rest and not rest.endswith("@1x")):
                # another scaling's, or an unscaled figure beyond 1x (those at 1x give way to the
                # scaled)
                continue
        out[k] = v
    return {**out, **scaled}


def derive(run: RunRecord, name: str) -> RunRecord:
    """The run scored with RoPE scaling ``name`` at evaluation time: a variant of its own."""
    return replace(
        run,
        overrides={**run.overrides, EVAL_KEY: name},
        metrics=None if run.metrics is None else scaled_metrics(run.metrics, name),
        extrapolation=None,  # extrapolation.json holds the unscaled lengths (and their notes)
        evaluation_of=run,
    )


def eval_variant_runs(runs: Sequence[RunRecord], ignore: Sequence[str]) -> list[RunRecord]:
    """The derived runs of ``runs``, in their order: for each scaling found in a variant (the runs
    sharing every override but ``ignore``: seed, tuned keys …), one per run of that variant. A
    ``ConfigError`` when none is found."""
    if is_ignored(EVAL_KEY, ignore):
        raise ConfigError(
            f"--eval-variants with --ignore covering {EVAL_KEY}: that override is what makes each "
            "evaluation-time scaling a variant of its own; drop it from --ignore"
        )

    def variant(r: RunRecord) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((k, v) for k, v in r.overrides.items() if not is_ignored(k, ignore)))

    names: dict[tuple[tuple[str, str], ...], set[str]] = {}
    for r in runs:
        names.setdefault(variant(r), set()).update(scaling_names(r))
    derived = [derive(r, n) for r in runs for n in sorted(names[variant(r)])]
    if not derived:
        raise ConfigError(
            "--eval-variants: no run holds an evaluation-time RoPE scaling (a finite "
            f"{PREFIX}<name>/ppl@<f>x in its metrics.json, e.g. {PREFIX}yarn/ppl@2x). Add "
            "`scalings: [linear, dynamic, yarn]` to callbacks.extrapolation "
            '(docs/studies.md, "Length extrapolation") and train, or score a finished RoPE run '
            "with "
            "python -m src.report extrapolation <run dir> --scaling yarn; else drop "
            "--eval-variants"
        )
    return derived


def without_scaled(secondary: Sequence[str]) -> list[str]:
    """The secondary metrics (keys or fnmatch patterns) less the per-scaling ones,
    ``extrapolation/<name>/…``: once each scaling is a variant, its figures are that variant's
    ``extrapolation/…``, and a per-scaling table would hold them again for the parent alone (an
    "inconclusive (no finite result)" row for every other variant)."""
    return [k for k in secondary if not (k.startswith(PREFIX) and "/" in k[len(PREFIX) :])]


def changed_by_scaling(runs: Sequence[RunRecord], key: str) -> bool:
    """Whether a derived run among ``runs`` holds a finite ``key`` that differs from its parent's:
    the figures worth a comparison (not test/*, which it lacks, nor a figure that repeats its
    parent's, such as the unscaled 1x)."""
    for r in runs:
        value = r.metric(key)
        if (
            r.evaluation_of is not None
            and value is not None
            and math.isfinite(value)
            and value != r.evaluation_of.metric(key)
        ):
            return True
    return False
