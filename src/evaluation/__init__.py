"""Evaluation: benchmarks (perplexity, LAMBADA, HellaSwag, translation; chosen with ``benchmarks=[…]``
on ``src.eval``), a length-batched scorer, model loading, length extrapolation, reports, and an
lm-evaluation-harness adapter (``harness``)."""

from src.evaluation.benchmarks import BENCHMARKS, build_benchmark
from src.evaluation.loading import LoadedModel, load_model
from src.evaluation.scorer import LogLikelihood, Scorer
from src.evaluation.suite import metrics_dict, print_results, run_benchmarks

__all__ = [
    "LoadedModel",
    "load_model",
    "metrics_dict",
    "print_results",
    "run_benchmarks",
    "LogLikelihood",
    "Scorer",
    "BENCHMARKS",
    "build_benchmark",
]
