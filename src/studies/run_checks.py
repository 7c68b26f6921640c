"""Checks on a set of runs before any statistic is computed from them.

* **Duplicated seeds.** Two run directories with the same overrides (the variant *and* the seed)
  are one sample, not two: a copied run directory, or ``python -m src.report dirA dirB`` where dirB
  is dirA run again. Counted twice they shrink every interval and p-value. Keys that only move
  files (``hydra.*``, ``paths.*``, ``ckpt_path``, ``sweep_resume.*``, progress bars) do not make two
  runs different.
* **Mixed units.** A loss is in nats per token of the run's tokenizer: a char-level run's loss and
  a BPE run's are not one metric. Runs whose tokenizers differ are refused for a per-token metric;
  a per-byte metric (``bits_per_byte``) does not depend on the tokenizer.

Both are ``ConfigError``\\ s naming the runs and the fix (the report prints them as one line).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from src.errors import ConfigError
from src.studies.runs import RunRecord, is_ignored

#: overrides that only move files or change the console: two runs differing only in them computed
#: the same thing
FILE_ONLY_KEYS = (
    "hydra.",
    "paths.",
    "ckpt_path",
    "sweep_resume.",
    "trainer.enable_progress_bar",
    "trainer.enable_model_summary",
)
#: metric names whose unit does not depend on the tokenizer
PER_BYTE = ("bits_per_byte", "per_byte", "bpb")


def sample_key(run: RunRecord) -> tuple[tuple[str, str], ...]:
    """What a run computed, as far as its directory says: its overrides less the file-only keys, and
    its seed."""
    keys = {k: v for k, v in run.overrides.items() if not is_ignored(k, FILE_ONLY_KEYS)}
    keys["seed"] = str(run.seed)
    return tuple(sorted(keys.items()))


def check_duplicates(runs: Sequence[RunRecord]) -> None:
    """Refuse two runs of the same variant and seed (module docstring), naming both directories."""
    seen: dict[tuple[tuple[str, str], ...], RunRecord] = {}
    for run in runs:
        key = sample_key(run)
        if key in seen:
            label = ", ".join(f"{k}={v}" for k, v in key if k != "seed") or "(defaults)"
            raise ConfigError(
                f"{seen[key].path} and {run.path} are the same run twice (variant {label}, "
                f"seed={run.seed}): a copied run directory, or a sweep given twice (python -m "
                "src.report <dir> <the same sweep re-run>). Counted as two seeds they would "
                "shrink every interval; give the report one of them (move the other out of the "
                "directories given)"
            )
        seen[key] = run


def tokenizer_of(run: RunRecord) -> str | None:
    """The run's tokenizer as ``name`` (``hf:<path>``, ``char:<chars>`` when fixed); None when its
    config has none."""
    node: Any = run.config.get("tokenizer")
    if not isinstance(node, dict) or not node.get("name"):
        return None
    name = str(node["name"])
    detail = node.get("path") or node.get("chars")
    return (
        f"{name}:{json.dumps(detail) if not isinstance(detail, str) else detail}"
        if detail
        else name
    )


def check_units(runs: Sequence[RunRecord], metrics: Sequence[str]) -> None:
    """Refuse to compare a per-token verdict metric across runs of different tokenizers, naming a
    run of each. (The selection metric is compared within a variant only, which has one
    tokenizer.)"""
    per_token = [m for m in metrics if m and not any(tag in m for tag in PER_BYTE)]
    if not per_token:
        return
    by_tokenizer: dict[str, list[RunRecord]] = {}
    for run in runs:
        tok = tokenizer_of(run)
        if tok is not None:
            by_tokenizer.setdefault(tok, []).append(run)
    if len(by_tokenizer) > 1:
        groups = "; ".join(
            f"tokenizer={tok}: {len(rs)} run(s), e.g. {rs[0].path}"
            for tok, rs in by_tokenizer.items()
        )
        raise ConfigError(
            f"the runs were trained with different tokenizers ({groups}); "
            f"{' and '.join(per_token)} is measured per token of each run's own tokenizer, so the "
            "runs are not in one unit. Report each tokenizer's runs apart, or compare a per-byte "
            "metric (--metric <benchmark>/bits_per_byte from python -m src.eval "
            "benchmarks=[perplexity])"
        )
