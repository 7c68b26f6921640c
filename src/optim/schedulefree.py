"""``optim=schedulefree``: Schedule-Free AdamW (Defazio et al. 2024, "The Road Less Scheduled",
arXiv:2405.15682), the ``schedulefree`` package's ``AdamWScheduleFree``.

It needs no learning-rate schedule: it keeps a gradient sequence ``z`` and an average ``x``, and
the model's weights hold their interpolation ``y`` while training. ``optimizer.eval()`` puts
``x`` in the weights and ``optimizer.train()`` puts ``y`` back; the averaged ``x`` is the model
to evaluate and to keep. ``ScheduleFreeSwitch`` (a Lightning callback the objective adds through
``configure_callbacks``) applies the switch:

* at every validation (the sanity check included) and test: they score ``x``; training goes
  back to ``y`` at its next batch;
* at every checkpoint save: the file holds ``x`` and the optimiser state in eval mode, and the run
  goes on with ``y`` recomputed from them at its next batch, exactly as a run resumed from that file
  recomputes it, so a resumed run continues bit-identically (tests/optim/test_schedulefree.py);
* at the end of the fit: the final weights (validated, tested, exported) are ``x``.

Warmup is the optimiser's own (``optim.warmup_steps``); a ``scheduler`` that also moves the
learning rate is refused (``check_schedule``), since the averaging weights assume the
optimiser's own lr sequence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import torch
from schedulefree import AdamWScheduleFree
from torch import nn

from src.errors import ConfigError
from src.optim.base import (
    OPTIMIZERS,
    OptimizerConfig,
    Schedule,
    check_betas,
    check_weight_decay,
    is_count,
    is_number,
    param_groups,
)


def _schedule_free(trainer: pl.Trainer) -> list[AdamWScheduleFree]:
    return [o for o in trainer.optimizers if isinstance(o, AdamWScheduleFree)]


def in_train_mode(optimizer: AdamWScheduleFree) -> bool:
    return bool(optimizer.param_groups[0]["train_mode"])


class ScheduleFreeSwitch(pl.Callback):
    """The schedule-free ``train()``/``eval()`` switch around evaluation, saves and the end of fit.

    Each switch is idempotent and made where it is needed: eval at the start of every validation
    and test, train at every training batch (so a save at the end of a validation writes the weights
    the validation scored, without a switch back and forth)."""

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        for o in _schedule_free(trainer):
            o.train()  # a no-op but after an evaluation, a save in eval mode, or a resume

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        for o in _schedule_free(trainer):
            o.eval()

    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        for o in _schedule_free(trainer):
            o.eval()

    def on_predict_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        for o in _schedule_free(trainer):
            o.eval()

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        for o in _schedule_free(trainer):
            o.eval()

    def on_save_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        """Lightning has already read the weights and the optimiser state in train mode (``y``):
        switch to eval (``x``) and read them again. Training goes back to ``y`` at its next batch,
        so a second save at the same step (best and last) writes the same file, and a run resumed
        from it recomputes ``y`` from ``x`` exactly as this run does."""
        training = [o for o in _schedule_free(trainer) if in_train_mode(o)]
        if not training:
            return  # saved after a validation, a save or the fit: the weights are x already
        for o in training:
            o.eval()
        weights = trainer.strategy.lightning_module_state_dict()
        checkpoint["state_dict"] = {k: v.detach().clone() for k, v in weights.items()}
        if "optimizer_states" in checkpoint:
            checkpoint["optimizer_states"] = [
                trainer.strategy.optimizer_state(o) for o in trainer.optimizers
            ]


@OPTIMIZERS.register("schedulefree")
@dataclass(frozen=True, kw_only=True)
class ScheduleFree(OptimizerConfig):
    """``optim=schedulefree``: AdamWScheduleFree with nanoGPT's decay groups. ``warmup_steps``:
    its own linear warmup; ``r`` and ``weight_lr_power``: the averaging weights (the paper's
    defaults 0 and 2)."""

    averages_weights = True
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    warmup_steps: int = 0
    r: float = 0.0
    weight_lr_power: float = 2.0

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "betas", check_betas(self.betas, "[0.9,0.999]"))
        if self.betas[0] == 0:
            raise ConfigError(
                "optim.betas=[0, …] is invalid for optim=schedulefree: its first beta interpolates "
                "between the average and the gradient sequence and must be in (0, 1), e.g. 0.9"
            )
        if not is_number(self.eps) or self.eps <= 0:
            raise ConfigError(
                f"optim.eps={self.eps!r} is invalid: a small positive number, e.g. optim.eps=1e-8"
            )
        check_weight_decay(self.weight_decay)
        if not is_count(self.warmup_steps) or self.warmup_steps < 0:
            raise ConfigError(
                f"optim.warmup_steps={self.warmup_steps!r} is invalid: the optimiser's own linear "
                "warmup, a number of optimizer steps, 0 or more"
            )
        for key in ("r", "weight_lr_power"):
            value = getattr(self, key)
            if not is_number(value) or value < 0:
                raise ConfigError(
                    f"optim.{key}={value!r} is invalid: 0 or more (the paper uses r=0, "
                    "weight_lr_power=2)"
                )

    def check_schedule(self, schedule: Schedule, max_steps: int | None) -> None:
        if schedule.moves_lr():
            raise ConfigError(
                f"optim=schedulefree cannot be combined with {schedule.describe()}: the scheduler "
                "would also move the learning rate, which schedule-free sets itself. Set "
                "scheduler=none, and warm up with optim.warmup_steps=<steps>"
            )

    def build(
        self, model: nn.Module, device: torch.device, clips_under_mixed_precision: bool = False
    ) -> AdamWScheduleFree:
        return AdamWScheduleFree(
            param_groups(model, float(self.weight_decay), lr=float(self.lr)),
            lr=float(self.lr),
            betas=self.betas,
            eps=float(self.eps),
            warmup_steps=int(self.warmup_steps),
            r=float(self.r),
            weight_lr_power=float(self.weight_lr_power),
        )

    def callbacks(self) -> list[Any]:
        return [ScheduleFreeSwitch()]
