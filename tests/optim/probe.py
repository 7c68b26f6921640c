"""A callback the schedule-free tests add to a run (``+callbacks.probe._target_=tests.optim.probe.WeightsAtValidation``):
the weights and the optimiser's mode at the start of every validation."""

from __future__ import annotations

from typing import Any, ClassVar

import lightning.pytorch as pl


class WeightsAtValidation(pl.Callback):
    records: ClassVar[list[dict[str, Any]]] = []

    def on_validation_batch_start(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if batch_idx == 0:
            modes = [g["train_mode"] for o in trainer.optimizers for g in o.param_groups]
            weights = {k: v.detach().clone() for k, v in pl_module.state_dict().items()}
            WeightsAtValidation.records.append(
                {"step": trainer.global_step, "train_mode": modes, "weights": weights}
            )
