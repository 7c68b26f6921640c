"""Run directories written by hand (the files a real run leaves, docs/CONTRACTS.md), so the
report's selection and statistics can be checked against numbers chosen in the test."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml


def write_run(
    root: Path,
    overrides: Sequence[str],
    *,
    metrics: Mapping[str, Any] | None,
    config: Mapping[str, Any] | None = None,
    val_history: Sequence[tuple[int, float]] = (),
    train_history: Sequence[tuple[int, float]] = (),
    budget: Mapping[str, Any] | None = None,
    ngram: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> Path:
    """A run directory named after its overrides, with the given files."""
    run = root / (name or ",".join(o.lstrip("+").replace("/", ".") for o in overrides))
    (run / ".hydra").mkdir(parents=True)
    cfg: dict[str, Any] = {"seed": 0, "optim": {"lr": 0.001}, "model": {"ffn": {"name": "gelu"}}}
    for o in overrides:  # the config as Hydra would compose it for these overrides
        key, _, value = o.lstrip("+").partition("=")
        node = cfg
        parts = key.replace("/", ".").split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = {"name": value} if "/" in key else yaml.safe_load(value)
    for k, v in (config or {}).items():
        cfg[k] = v
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(cfg))
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(list(overrides)))
    (run / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"job": {"num": 0}}}))
    if metrics is not None:
        (run / "metrics.json").write_text(json.dumps(dict(metrics)))
    if val_history or train_history:
        (run / "csv" / "version_0").mkdir(parents=True)
        lines = ["step,train/loss,val/loss"]
        lines += [f"{s - 1},{v}," for s, v in train_history] + [
            f"{s - 1},,{v}" for s, v in val_history
        ]
        (run / "csv" / "version_0" / "metrics.csv").write_text("\n".join(lines) + "\n")
    if budget is not None:
        (run / "budget.json").write_text(json.dumps(dict(budget)))
    if ngram is not None:
        (run / "ngram.json").write_text(json.dumps(dict(ngram)))
    return run


def completed(val: float | None, test: float | None, **more: Any) -> dict[str, Any]:
    """metrics.json of a completed run (None -> the key is absent)."""
    m: dict[str, Any] = {
        "status": "completed",
        "error": None,
        "params": 1000,
        "tokens_seen": 6400,
        "global_step": 100,
        "wall_time_s": 1.0,
    }
    if val is not None:
        m["val/loss"] = val
    if test is not None:
        m["test/loss"] = test
    m.update(more)
    return m
