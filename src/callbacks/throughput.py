"""Throughput: windowed tokens/s, FLOPs/s and MFU per device from Lightning's public ``Throughput``
meter (curves over training), and a progress bar showing the run's tokens/s (``RunSummary``'s).

``TokenThroughput`` logs (every ``log_every_n_steps``, once ``window_size`` steps are in the
window) ``train/device/items_per_sec`` (= tokens/s per device), ``train/device/flops_per_sec``
and ``train/device/mfu`` (and the same under ``validate/`` and ``test/`` for those loops).
FLOPs per batch come from the task (``pl_module.flops_per_batch``: the model's own count,
``model.training_flops``); MFU divides by the device's peak, ``peak_tflops`` when given (A100
312, H100/H200 989 TFLOP/s dense bf16), else Lightning's own table
(``lightning.fabric.utilities.throughput.get_available_flops``). On CPU there is no peak, so only
tokens/s.

It does what Lightning's ``ThroughputMonitor`` does, on public API only (that callback reads
the trainer's private logger connector and loop state): tokens and samples are counted on every
batch (shapes only, no device work), and a timestamp (synchronised on CUDA) is taken only on the
training steps that log, so no other step pays a host-device sync. Validation inside ``fit`` is
taken out of the training clock.
"""

from __future__ import annotations

import math
import time
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.fabric.utilities.throughput import Throughput, get_available_flops
from lightning.pytorch.callbacks import RichProgressBar
from lightning.pytorch.utilities import rank_zero_only

from src.callbacks.summary import RunSummary
from src.lightning_compat import should_update_logs

#: the compute dtype of each Lightning precision setting (what the device's peak FLOPs depend on)
PRECISION_DTYPES = {
    "bf16-mixed": torch.bfloat16,
    "bf16-true": torch.bfloat16,
    "bf16": torch.bfloat16,
    "16-mixed": torch.float16,
    "16-true": torch.float16,
    "16": torch.float16,
    "64-true": torch.float64,
    "64": torch.float64,
}


class _Meter:
    """One loop's counters (cumulative since the loop started) and its ``Throughput`` window."""

    def __init__(self, throughput: Throughput) -> None:
        self.throughput = throughput
        self.t0 = time.perf_counter()
        self.tokens = self.samples = self.batches = self.pending = 0
        self.iteration = 0  # the step the loggers get for a validation/test figure

    def restart(self) -> None:
        self.throughput.reset()
        self.t0 = time.perf_counter()
        self.tokens = self.samples = self.batches = self.pending = 0


class TokenThroughput(pl.Callback):
    """Tokens/s, FLOPs/s and MFU per device for training, validation and test (see the module
    doc)."""

    def __init__(self, window_size: int = 20, peak_tflops: float | None = None) -> None:
        self.window_steps = window_size
        self.peak_tflops = peak_tflops
        self.available_flops: int | None = None
        self._meters: dict[str, _Meter] = {}
        self._val_started: float | None = None

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if not hasattr(pl_module, "tokens_per_batch"):
            raise TypeError(
                f"{type(self).__name__} needs a task that records tokens_per_batch (an "
                "src.objectives.LMTask)"
            )
        if self.peak_tflops:
            self.available_flops = int(float(self.peak_tflops) * 1e12)
        else:
            dtype = PRECISION_DTYPES.get(str(trainer.precision), torch.float32)
            self.available_flops = get_available_flops(trainer.strategy.root_device, dtype)
        # one timed update per logging step: a window of `window_size` steps is this many updates
        window = max(2, math.ceil(self.window_steps / max(1, trainer.log_every_n_steps)))
        for name in ("train", "validate", "test"):
            self._meters[name] = _Meter(
                Throughput(
                    available_flops=self.available_flops,
                    world_size=trainer.world_size,
                    window_size=window,
                )
            )

    # ------------------------------------------------------------ the loops
    @rank_zero_only
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._meters["train"].restart()

    @rank_zero_only
    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        meter = self._count("train", pl_module, batch)
        optimizer_step = (batch_idx + 1) % max(
            1, trainer.accumulate_grad_batches
        ) == 0 or trainer.is_last_batch
        # the effective batch is over, its optimizer step included
        if optimizer_step and should_update_logs(trainer):
            # the step Lightning logs this optimizer step's metrics under (its batches-that-stepped
            # count, 0-based)
            self._measure(trainer, pl_module, "train", meter, step=max(trainer.global_step - 1, 0))

    @rank_zero_only
    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._meters["validate"].restart()
            self._val_started = time.perf_counter()

    @rank_zero_only
    def on_validation_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if not trainer.sanity_checking:
            meter = self._count("validate", pl_module, batch)
            self._measure(trainer, pl_module, "validate", meter, step=meter.iteration)

    @rank_zero_only
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._val_started is not None and trainer.state.fn == "fit":
            # validation is not training time
            self._meters["train"].t0 += time.perf_counter() - self._val_started
        self._val_started = None

    @rank_zero_only
    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._meters["test"].restart()

    @rank_zero_only
    def on_test_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        meter = self._count("test", pl_module, batch)
        self._measure(trainer, pl_module, "test", meter, step=meter.iteration)

    # ------------------------------------------------------------ counting and timing
    def _count(self, stage: str, pl_module: pl.LightningModule, batch: Any) -> _Meter:
        meter = self._meters[stage]
        # the objective's Prepared.tokens for this batch
        meter.tokens += int(pl_module.tokens_per_batch)
        meter.samples += _batch_size(batch)
        meter.batches += 1
        meter.pending += 1
        meter.iteration += 1
        return meter

    def _measure(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        stage: str,
        meter: _Meter,
        step: int,
    ) -> None:
        """One timed update (FLOPs for every batch since the previous one) and, once the window
        holds enough updates, the rates handed to every logger."""
        if trainer.strategy.root_device.type == "cuda":
            torch.cuda.synchronize()  # the clock must include the queued kernels
        per_batch = getattr(pl_module, "flops_per_batch", None)
        meter.throughput.update(
            time=time.perf_counter() - meter.t0,
            batches=meter.batches,
            samples=meter.samples,
            lengths=meter.tokens,
            flops=None if per_batch is None else per_batch * meter.pending,
        )
        meter.pending = 0
        metrics = meter.throughput.compute()
        if not metrics:
            return
        named = {f"{stage}{meter.throughput.separator}{k}": v for k, v in metrics.items()}
        for logger in trainer.loggers:
            logger.log_metrics(named, step=step)


def _batch_size(batch: Any) -> int:
    if "tokens" in batch:
        return int(batch["tokens"].shape[0])
    return int(batch["src_ids"].shape[0])


class TokensPerSecondBar(RichProgressBar):
    """Lightning's ``RichProgressBar`` plus ``tok/s`` (training only).

    Shows the run's one tokens/s figure, ``RunSummary.tokens_per_s`` (src/callbacks/summary.py:
    training tokens since training started over its wall time, validation excluded; the value
    metrics.json records at the end), when the run has a ``RunSummary`` (every ``src.train`` run
    does), else measures wall time between batches itself. ``refresh_rate`` is redraws per second
    (Rich's); the training bar's counter and metrics are also updated at most that often (and at the
    last step), not after every batch: Lightning's bar reads every progress-bar metric and updates
    its Rich task on each batch (~0.5 ms of Python per step, 1-5% of a millisecond-scale step)."""

    def __init__(self, refresh_rate: int = 1, leave: bool = False) -> None:
        super().__init__(refresh_rate=refresh_rate, leave=leave)
        self._t0: float | None = None
        self._tokens = 0
        self._next_update = 0.0  # perf_counter() time from which the training bar is updated again

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        super().on_train_start(trainer, pl_module)
        self._t0, self._tokens, self._next_update = time.perf_counter(), 0, 0.0

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        self._tokens += int(getattr(pl_module, "tokens_per_batch", 0))
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
        summary = next((c for c in trainer.callbacks if isinstance(c, RunSummary)), None)
        rate = summary.tokens_per_s if summary is not None else None
        if summary is None and self._t0 is not None and self._tokens:
            rate = self._tokens / max(time.perf_counter() - self._t0, 1e-9)
        if rate is not None:
            metrics["tok/s"] = f"{rate:,.0f}"
        return metrics
