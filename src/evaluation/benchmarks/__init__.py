"""Evaluation tasks, registered by type name (``task:`` in ``conf/tasks/<entry>.yaml``)."""
from src.evaluation.benchmarks import hellaswag, lambada, perplexity, translation  # noqa: E402,F401  (register)
from src.evaluation.benchmarks.base import (
    BENCHMARKS,
    Completion,
    CompletionBenchmark,
    MultipleChoice,
    MultipleChoiceBenchmark,
    Benchmark,
    BenchmarkResult,
    build_benchmark,
)

__all__ = ["BENCHMARKS", "Completion", "CompletionBenchmark", "MultipleChoice", "MultipleChoiceBenchmark", "Benchmark", "BenchmarkResult",
           "build_benchmark"]
