"""Evaluation benchmarks, registered by type name (``task:`` in ``conf/tasks/<entry>.yaml``; the CLI
selects entries with ``tasks=[…]``). In code a *task* is a training objective
(``src/objectives``)."""

from src.evaluation.benchmarks.base import (
    BENCHMARKS,
    Benchmark,
    BenchmarkResult,
    Completion,
    CompletionBenchmark,
    MultipleChoice,
    MultipleChoiceBenchmark,
    build_benchmark,
)

__all__ = [
    "BENCHMARKS",
    "Completion",
    "CompletionBenchmark",
    "MultipleChoice",
    "MultipleChoiceBenchmark",
    "Benchmark",
    "BenchmarkResult",
    "build_benchmark",
]
