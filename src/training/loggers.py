"""Logger factories for the ``logger`` config group where a Lightning logger needs more than its
constructor (each YAML in conf/logger/ names Lightning's class or one of these)."""

from __future__ import annotations

import os
from typing import Any


def mlflow_logger(tracking_uri: str, **kwargs: Any):  # -> lightning.pytorch.loggers.MLFlowLogger
    """Lightning's ``MLFlowLogger``; a ``file:`` tracking URI is a file store in that directory.

    MLflow 3 keeps its file store in maintenance mode and refuses it unless
    ``MLFLOW_ALLOW_FILE_STORE=true``; a store inside the run directory (no server, no database,
    nothing shared between runs) is what we want, so that opt-out is set for ``file:`` URIs
    only. Any other URI (``http://…``, ``sqlite:///…``) goes to MLflow unchanged.
    """
    from lightning.pytorch.loggers import MLFlowLogger

    if tracking_uri.startswith("file:"):
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    return MLFlowLogger(tracking_uri=tracking_uri, **kwargs)


def close_loggers(trainer: Any, failed: bool = False) -> None:
    """End what Lightning leaves open after ``fit`` and ``test``: a W&B run is finished, so an
    offline run directory is complete (``files/wandb-summary.json``, ready for ``wandb sync``)
    and the next run in the same process (a multirun) starts its own."""
    from lightning.pytorch.loggers import WandbLogger

    for lg in getattr(trainer, "loggers", None) or []:
        if isinstance(lg, WandbLogger) and getattr(lg, "_experiment", None) is not None:
            lg.experiment.finish(exit_code=1 if failed else 0)
