"""Evaluate length extrapolation at the end of training (``src.evaluation.extrapolation``).

Add it to a run with::

    callbacks:
      extrapolation:
        _target_: src.callbacks.length_extrapolation.LengthExtrapolation
        factors: [1, 2, 4]
        output_dir: ${paths.output_dir}

After ``fit`` it scores the final weights on the validation text at each factor × the
training length (``block_size``), writes ``<output_dir>/extrapolation.json`` and hands the
flat ``extrapolation/ppl@2x`` … figures to the trainer's metrics, so the run's
``metrics.json`` (written from them by ``src.training.runner``) and the CSV log carry them.

``scalings: [linear, dynamic, yarn]`` scores a RoPE model again with each RoPE scaling (a type
name or a ``model.position.scaling`` node; ``src.evaluation.extrapolation.scaling_node``), as
``extrapolation/<name>/ppl@2x`` … and ``extrapolation_<name>.json``. A model without rotary
frequencies (learned, ALiBi, T5 bias …) gets those figures as not applicable, with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities import rank_zero_only

from src.errors import ConfigError
from src.evaluation.extrapolation import (
    DEFAULT_FACTORS,
    LengthResult,
    evaluate_lengths,
    format_table,
    metrics_from,
    scaling_label,
    write_results,
)

log = logging.getLogger(__name__)


class LengthExtrapolation(pl.Callback):
    """Perplexity at ``factors`` × the training length on the validation split, after fitting."""

    def __init__(
        self,
        factors: Sequence[float] = DEFAULT_FACTORS,
        stride: int | None = None,
        max_tokens: int | None = None,
        split: str = "val",
        output_dir: str | None = None,
        max_batch_tokens: int = 16384,
        scalings: Sequence[str | Mapping[str, Any]] = (),
    ) -> None:
        self.factors = [float(f) for f in factors]
        self.scalings = [s if isinstance(s, str) else dict(s) for s in scalings]
        self.stride, self.max_tokens, self.split = stride, max_tokens, split
        self.output_dir, self.max_batch_tokens = output_dir, max_batch_tokens
        self.metrics: dict[str, object] = {}

    @rank_zero_only
    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        dm = trainer.datamodule
        tokens = getattr(dm, "tokens", {}).get(self.split) if dm is not None else None
        if tokens is None:
            log.warning(
                "length extrapolation skipped: the datamodule has no '%s' token stream (a text "
                "source is needed)",
                self.split,
            )
            return
        cfg = getattr(pl_module, "cfg", {}) or {}
        train_length = int(cfg.get("block_size") or pl_module.model.config.max_seq_len)  # type: ignore[union-attr]
        self.metrics = {}
        for scaling in [None, *self.scalings]:
            label = scaling_label(scaling)
            try:
                with torch.no_grad():
                    results = evaluate_lengths(
                        pl_module.model,
                        tokens,
                        train_length,
                        self.factors,
                        self.stride,  # type: ignore[arg-type]
                        self.max_tokens,
                        self.max_batch_tokens,
                        scaling=scaling,
                    )
            # no rotary frequencies to scale: the figures are not applicable, and why
            except ConfigError as e:
                results = [
                    LengthResult(
                        f, max(2, int(round(f * train_length))), note=f"not applicable: {e}"
                    )
                    for f in self.factors
                ]
            log.info(
                "length extrapolation (trained at %d tokens%s):\n%s",
                train_length,
                f", {label} RoPE scaling" if label else "",
                format_table(results),
            )
            self.metrics.update(
                metrics_from(
                    results,
                    train_length,
                    "extrapolation" if label is None else f"extrapolation/{label}",
                )
            )
            if self.output_dir:
                write_results(
                    self.output_dir,
                    results,
                    train_length,
                    {"checkpoint": "final weights (end of fit)", "stride": self.stride},
                    label,
                )
        # not applicable -> NaN, which metrics.json writes as null (the reason is in
        # extrapolation.json)
        numbers = {
            k: float("nan") if v is None else float(v)
            for k, v in self.metrics.items()
            if v is None or isinstance(v, (int, float))
        }
        # metrics.json is written from the trainer's metrics (RunSummary collects them at fit end)
        trainer.callback_metrics.update({k: torch.tensor(v) for k, v in numbers.items()})
        for lg in trainer.loggers:
            lg.log_metrics(numbers, step=trainer.global_step)
