"""Benchmarks during training: HellaSwag (or any ``src.eval`` benchmark) every N optimizer steps.

build-nanogpt and llm.c evaluate HellaSwag every 250 steps while pretraining GPT-2 on
FineWeb-Edu; ``experiment=gpt2_fineweb`` adds this callback to do the same::

    callbacks:
      benchmarks:
        _target_: src.callbacks.benchmarks.BenchmarkEval
        benchmarks: {hellaswag: {type: hellaswag, path: null}}   # entries as conf/benchmarks/<name>.yaml
        every_n_steps: 250
        limit: null                                          # all items (HellaSwag: 10,042)

Each run scores the live weights with the same ``Scorer`` and benchmark code as
``python -m src.eval`` (so the numbers are the ones it would report for a checkpoint of that
step) and logs ``<benchmark>/<metric>`` (``hellaswag/acc_norm``) to every logger and metrics.json.
Rank 0 evaluates; the other ranks wait for it at the next step's gradient all-reduce.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import lightning.pytorch as pl
import torch

from src.evaluation.benchmarks import build_benchmark
from src.evaluation.scorer import Scorer
from src.evaluation.suite import run_benchmarks

log = logging.getLogger(__name__)


class BenchmarkEval(pl.Callback):
    """``benchmarks`` (name -> a ``conf/benchmarks`` entry) every ``every_n_steps`` optimizer steps and after
    fitting."""

    def __init__(
        self,
        benchmarks: Mapping[str, Mapping[str, Any]],
        every_n_steps: int = 250,
        limit: int | None = None,
        batch_size: int = 32,
        max_batch_tokens: int = 16384,
    ) -> None:
        if int(every_n_steps) < 1:
            raise ValueError(f"callbacks.benchmarks.every_n_steps={every_n_steps} must be >= 1")
        # fail at startup
        self.benchmarks = {
            name: build_benchmark(name, dict(node)) for name, node in benchmarks.items()
        }
        self.every_n_steps, self.limit = int(every_n_steps), limit
        self.batch_size, self.max_batch_tokens = int(batch_size), int(max_batch_tokens)
        self._last_step = -1

    def _evaluate(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        step = int(trainer.global_step)
        if step == self._last_step:
            return
        self._last_step = step
        metrics: dict[str, float] = {}
        if trainer.is_global_zero:
            model = pl_module.model  # type: ignore[attr-defined]
            was_training = model.training
            model.eval()
            scorer = Scorer(
                model,
                pl_module.tokenizer,
                batch_size=self.batch_size,  # type: ignore[attr-defined]
                max_batch_tokens=self.max_batch_tokens,
                show_progress=False,
            )
            with torch.no_grad():
                results = run_benchmarks(scorer, self.benchmarks, self.limit)
            model.train(was_training)
            metrics = {
                f"{name}/{k}": float(v)
                for name, r in results.items()
                for k, v in r.metrics.items()
                if not k.endswith("_stderr")
            }
            log.info("step %d: %s", step, ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()))
        if metrics and trainer.loggers:
            for lg in trainer.loggers:
                lg.log_metrics(metrics, step=step)
        # -> metrics.json
        trainer.callback_metrics.update({k: torch.tensor(v) for k, v in metrics.items()})

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        # once per optimizer step: global_step has just advanced past a multiple of every_n_steps
        if (
            trainer.global_step % self.every_n_steps == 0
            and trainer.global_step > 0
            and (batch_idx + 1) % trainer.accumulate_grad_batches == 0
        ):
            self._evaluate(trainer, pl_module)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # the final weights (skipped when the last step was just evaluated)
        self._evaluate(trainer, pl_module)
