"""Run a set of tasks on one model, time them, and report: a rich table and metrics.json."""
from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from src.evaluation.scorer import Scorer
from src.evaluation.tasks.base import Task, TaskResult


def run_tasks(scorer: Scorer, tasks: Mapping[str, Task], limit: int | None = None) -> dict[str, TaskResult]:
    """Run each task in order; fill in the tokens it made the model read and its wall time."""
    results: dict[str, TaskResult] = {}
    for name, task in tasks.items():
        tokens_before, start = scorer.tokens_read, time.perf_counter()
        result = task.run(scorer, limit)
        result.seconds = time.perf_counter() - start
        result.tokens = scorer.tokens_read - tokens_before
        results[name] = result
    return results


def _fmt(value: float) -> str:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return str(value)
    return f"{value:.4f}" if abs(value) < 1000 else f"{value:,.1f}"


def results_table(results: Mapping[str, TaskResult], title: str = "evaluation") -> Table:
    """task | metric | value (± stderr) | examples | tokens | seconds, one row per metric."""
    table = Table(title=title)
    for col, justify in (("task", "left"), ("metric", "left"), ("value", "right"), ("examples", "right"),
                         ("tokens", "right"), ("seconds", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for name, r in results.items():
        first = True
        for metric, value in r.metrics.items():
            if metric.endswith("_stderr"):
                continue
            cell = _fmt(value)
            err = r.metrics.get(f"{metric}_stderr")
            if err is not None and not math.isnan(err):
                cell += f" ± {err:.4f}"
            table.add_row(name if first else "", metric, cell, f"{r.examples:,}" if first else "",
                          f"{r.tokens:,}" if first else "", f"{r.seconds:.1f}" if first else "")
            first = False
    return table


def print_results(results: Mapping[str, TaskResult], title: str = "evaluation", console: Console | None = None) -> None:
    (console or Console()).print(results_table(results, title))


def metrics_dict(results: Mapping[str, TaskResult], **meta: Any) -> dict[str, Any]:
    """metrics.json content: run facts, flat ``<task>/<metric>`` keys (as training's
    metrics.json), and per task its metrics, examples, tokens, seconds and details."""
    out: dict[str, Any] = {"status": "completed", "error": None, **meta}
    for name, r in results.items():
        for metric, value in r.metrics.items():
            out[f"{name}/{metric}"] = value
    out["tasks"] = {
        name: {"metrics": r.metrics, "examples": r.examples, "tokens": r.tokens, "seconds": round(r.seconds, 3),
               "tokens_per_s": r.tokens / r.seconds if r.seconds > 0 else None, **r.details}
        for name, r in results.items()
    }
    return out


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """JSON with NaN written as null (strict JSON readers reject NaN)."""
    def clean(x: Any) -> Any:
        if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(clean(dict(data)), indent=2) + "\n")
