"""Throughput: Lightning's ``ThroughputMonitor`` counting tokens, and a progress bar showing them.

``TokenThroughput`` logs (every ``log_every_n_steps``, once ``window_size`` steps are in the
window) ``train|device/items_per_sec`` (= tokens/s per device), ``train|device/flops_per_sec``
and ``train|device/mfu``. FLOPs per batch come from the task (``pl_module.flops_per_batch``: the
model's own count, ``model.training_flops``); MFU divides by the device's peak, ``peak_tflops``
when given (A100 312, H100/H200 989 TFLOP/s dense bf16), else Lightning's own table. On CPU
there is no peak, so only tokens/s.
"""
from __future__ import annotations

import math
import time
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import RichProgressBar, ThroughputMonitor

from src.objectives.base import lightning_logs_step


class TokenThroughput(ThroughputMonitor):
    """``ThroughputMonitor`` whose items are tokens (``pl_module.batch_tokens(batch)``)."""

    def __init__(self, window_size: int = 20, peak_tflops: float | None = None) -> None:
        super().__init__(batch_size_fn=_batch_size, length_fn=None, window_size=window_size)
        self.window_steps = window_size
        self.peak_tflops = peak_tflops
        self._pending: dict[Any, int] = {}  # batches since the last timed update, per stage
        self.tokens_per_s: float | None = None  # latest per-device figure, read by the progress bar

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if not callable(getattr(pl_module, "batch_tokens", None)):
            raise TypeError(f"{type(self).__name__} needs a task with batch_tokens(batch) (an src.objectives.LMTask)")
        self.length_fn = pl_module.batch_tokens  # type: ignore[assignment]
        # one timed update per logging step: a window of `window_size` steps is this many updates
        self.kwargs["window_size"] = max(2, math.ceil(self.window_steps / max(1, trainer.log_every_n_steps)))
        super().setup(trainer, pl_module, stage)
        if self.peak_tflops:
            self.available_flops = int(float(self.peak_tflops) * 1e12)
            for t in self._throughputs.values():
                t.available_flops = self.available_flops

    def _start(self, trainer: pl.Trainer) -> None:
        super()._start(trainer)
        self._pending[trainer.state.stage] = 0  # type: ignore[index]

    def _update(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, iter_num: int) -> None:
        """Lightning's monitor calls ``torch.cuda.synchronize()`` on every batch so that its
        clock is right. Its counters are cumulative, so we count tokens and samples on every
        batch (shapes only: no device work, so no ``inference_mode`` either) but take a
        synchronised timestamp only on the training steps that log: same rates, and no
        host-device sync in the other steps. FLOPs are handed over per update, i.e. for every
        batch since the previous one."""
        stage = trainer.state.stage
        assert stage is not None
        self._lengths[stage] += self.length_fn(batch)  # type: ignore[misc]
        self._samples[stage] += self.batch_size_fn(batch)
        self._batches[stage] += 1
        self._pending[stage] = self._pending.get(stage, 0) + 1
        if stage.value == "train" and not lightning_logs_step(trainer):
            return
        if trainer.strategy.root_device.type == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - self._t0s[stage]
        per_batch = getattr(pl_module, "flops_per_batch", None)
        self._throughputs[stage].update(
            time=elapsed,
            batches=self._batches[stage],
            samples=self._samples[stage],
            lengths=self._lengths[stage],
            flops=None if per_batch is None else per_batch * self._pending[stage],
        )
        self._pending[stage] = 0

    def _compute(self, trainer: pl.Trainer, iter_num: int | None = None) -> None:
        super()._compute(trainer, iter_num)
        stage = trainer.state.stage
        if stage is not None and stage.value == "train" and lightning_logs_step(trainer):
            rate = self._throughputs[stage].compute().get("device/items_per_sec")
            if rate is not None:
                self.tokens_per_s = float(rate)


def _batch_size(batch: Any) -> int:
    if "tokens" in batch:
        return int(batch["tokens"].shape[0])
    return int(batch["src_ids"].shape[0])


class TokensPerSecondBar(RichProgressBar):
    """Lightning's ``RichProgressBar`` plus ``tok/s`` (per device, training only).

    Reads the figure from a ``TokenThroughput`` callback when present, else measures wall
    time between batches itself. ``refresh_rate`` is redraws per second (Rich's); the training
    bar's counter and metrics are also updated at most that often (and at the last step), not
    after every batch: Lightning's bar reads every progress-bar metric and updates its Rich task
    on each batch (~0.5 ms of Python per step, 1-5% of a millisecond-scale step).
    """

    def __init__(self, refresh_rate: int = 1, leave: bool = False) -> None:
        super().__init__(refresh_rate=refresh_rate, leave=leave)
        self._t0: float | None = None
        self._tokens = 0
        self._next_update = 0.0  # perf_counter() time from which the training bar is updated again

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        super().on_train_start(trainer, pl_module)
        self._t0, self._tokens, self._next_update = time.perf_counter(), 0, 0.0

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        fn = getattr(pl_module, "batch_tokens", None)
        if callable(fn):
            self._tokens += fn(batch)
        now = time.perf_counter()
        last = trainer.is_last_batch or 0 < trainer.max_steps <= trainer.global_step
        if now < self._next_update and not last:
            return
        self._next_update = now + 1.0 / max(float(self.refresh_rate), 1e-3)
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    def _get_train_description(self, current_epoch: int) -> str:
        # runs are counted in steps (max_epochs=-1): Lightning would print "Epoch 0/-2"
        if self.trainer.max_epochs is None or self.trainer.max_epochs < 0:
            return f"Epoch {current_epoch}"
        return super()._get_train_description(current_epoch)

    def get_metrics(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Any]:
        metrics = super().get_metrics(trainer, pl_module)
        metrics.pop("v_num", None)
        rate = next((c.tokens_per_s for c in trainer.callbacks if isinstance(c, TokenThroughput)), None)
        if rate is None and self._t0 is not None and self._tokens:
            rate = self._tokens / max(time.perf_counter() - self._t0, 1e-9)
        if rate is not None:
            metrics["tok/s"] = f"{rate:,.0f}"
        return metrics
