"""Evaluation benchmarks, registered by type name (``type:`` in ``conf/benchmarks/<entry>.yaml``;
the command line selects entries with ``benchmarks=[…]``)."""

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
