"""Run a set of benchmarks on one model, time them, and report: a rich table and metrics.json
(keys ``<entry>/<metric>`` and ``benchmarks``, the command line's name for them)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from src.evaluation.benchmarks.base import Benchmark, BenchmarkResult
from src.evaluation.scorer import Scorer


def run_benchmarks(
    scorer: Scorer, benchmarks: Mapping[str, Benchmark], limit: int | None = None
) -> dict[str, BenchmarkResult]:
    """Run each task in order; fill in the tokens it made the model read and its wall time."""
    results: dict[str, BenchmarkResult] = {}
    for name, task in benchmarks.items():
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


def results_table(results: Mapping[str, BenchmarkResult], title: str = "evaluation") -> Table:
    """task | metric | value (± stderr) | examples | tokens read | seconds, one row per metric.
    "tokens read" counts every token the model processed, context included (a sliding window
    re-reads its overlap); a perplexity's scored tokens are in its details (metrics.json)."""
    table = Table(title=title)
    for col, justify in (
        ("benchmark", "left"),
        ("metric", "left"),
        ("value", "right"),
        ("examples", "right"),
        ("tokens read", "right"),
        ("seconds", "right"),
    ):
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
            table.add_row(
                name if first else "",
                metric,
                cell,
                f"{r.examples:,}" if first else "",
                f"{r.tokens:,}" if first else "",
                f"{r.seconds:.1f}" if first else "",
            )
            first = False
    notes = word_ppl_notes(results)
    if notes:
        table.caption = "\n".join(notes)
    return table


def word_ppl_notes(results: Mapping[str, BenchmarkResult]) -> list[str]:
    """A word under each ``word_ppl``: it divides the NLL by whitespace-separated words, the unit of
    word-level benchmarks (WikiText, PTB); on code, or text with few spaces, one "word" is many
    tokens and the figure compares with nothing (the tokens per word say how far off it is)."""
    notes = []
    for name, r in results.items():
        per_word = r.details.get("tokens_per_word")
        if not any(m.endswith("word_ppl") for m in r.metrics) or per_word is None:
            continue
        notes.append(
            f"{name}: word_ppl = exp(NLL per whitespace-separated word; {per_word:.1f} tokens per "
            "word here): the figure word-level benchmarks (WikiText, PTB) quote; on code or text "
            "with few spaces it compares with nothing; use ppl or bits_per_byte there"
        )
    return notes


def print_results(
    results: Mapping[str, BenchmarkResult],
    title: str = "evaluation",
    console: Console | None = None,
) -> None:
    (console or Console()).print(results_table(results, title))


def metrics_dict(results: Mapping[str, BenchmarkResult], **meta: Any) -> dict[str, Any]:
    """metrics.json content: run facts, flat ``<task>/<metric>`` keys (as training's metrics.json),
    and per task its metrics, examples, tokens read (context included), seconds and details."""
    out: dict[str, Any] = {"status": "completed", "error": None, **meta}
    for name, r in results.items():
        for metric, value in r.metrics.items():
            out[f"{name}/{metric}"] = value
    out["benchmarks"] = {
        name: {
            "metrics": r.metrics,
            "examples": r.examples,
            "tokens_read": r.tokens,
            "seconds": round(r.seconds, 3),
            "tokens_read_per_s": r.tokens / r.seconds if r.seconds > 0 else None,
            **r.details,
        }
        for name, r in results.items()
    }
    return out
