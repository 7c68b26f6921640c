"""Evaluation: tasks (perplexity, LAMBADA, HellaSwag, translation), a length-batched
scorer, model loading, reports, and an lm-evaluation-harness adapter (``harness``)."""
from src.evaluation.loading import LoadedModel, load_model
from src.evaluation.runner import metrics_dict, print_results, run_tasks
from src.evaluation.scorer import LogLikelihood, Scorer
from src.evaluation.tasks import EVAL_TASKS, build_task

__all__ = ["LoadedModel", "load_model", "metrics_dict", "print_results", "run_tasks", "LogLikelihood", "Scorer",
           "EVAL_TASKS", "build_task"]
