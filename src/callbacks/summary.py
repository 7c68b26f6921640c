"""Collects what ``metrics.json`` reports besides the logged metrics: the validation history
(for ``best_step``) and the time spent fitting (for throughput)."""
from __future__ import annotations

import math
import time
from typing import Any

import lightning.pytorch as pl


class RunSummary(pl.Callback):
    """Added by ``src.training.runner`` to every run. Its validation history is saved in
    checkpoints, so ``best_step`` of a resumed run covers the validations before the resume."""

    def __init__(self, monitor: str = "val/loss") -> None:
        self.monitor = monitor
        self.history: list[tuple[int, float]] = []  # (global_step, monitored value) per validation
        self.fit_time_s = 0.0
        self._t0: float | None = None
        self.final: dict[str, float] = {}  # last value of every logged scalar (updated at stage ends)
        self.tokens_at_start = 0  # the task's token counter when training (re)started

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._t0 = time.perf_counter()

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.tokens_at_start = int(getattr(pl_module, "tokens_seen", 0))

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._t0 is not None:
            self.fit_time_s += time.perf_counter() - self._t0
            self._t0 = None
        self._collect(trainer)

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        self.on_fit_end(trainer, pl_module)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        value = trainer.callback_metrics.get(self.monitor)
        if value is not None:  # one host sync per validation, not per step
            self.history.append((int(trainer.global_step), float(value)))
        self._collect(trainer)

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._collect(trainer)

    def _collect(self, trainer: pl.Trainer) -> None:
        for k, v in trainer.callback_metrics.items():
            try:
                self.final[k] = float(v)
            except (TypeError, ValueError):
                pass

    @property
    def best(self) -> tuple[int, float] | None:
        finite = [(s, v) for s, v in self.history if math.isfinite(v)]
        return min(finite, key=lambda sv: sv[1]) if finite else None

    def state_dict(self) -> dict[str, Any]:
        return {"history": [[s, v] for s, v in self.history]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.history = [(int(s), float(v)) for s, v in state_dict.get("history", [])]
