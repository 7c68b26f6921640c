"""Evaluation tasks, registered by type name (``task:`` in ``conf/tasks/<entry>.yaml``)."""
from src.evaluation.tasks import hellaswag, lambada, perplexity, translation  # noqa: E402,F401  (register)
from src.evaluation.tasks.base import (
    EVAL_TASKS,
    Completion,
    CompletionTask,
    MultipleChoice,
    MultipleChoiceTask,
    Task,
    TaskResult,
    build_task,
)

__all__ = ["EVAL_TASKS", "Completion", "CompletionTask", "MultipleChoice", "MultipleChoiceTask", "Task", "TaskResult",
           "build_task"]
