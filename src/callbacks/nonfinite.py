"""Non-finite (NaN/inf) training loss: stop the run, or skip the update (``reliability.nonfinite``).

``stop`` (default) costs no host sync per step. Each backward pass ORs ``~isfinite(loss)`` into a
flag that stays on the device (and records the first bad step there). The host reads the flag
only every ``check_every_n_steps`` steps, before every validation, before every checkpoint is
written, and at the end of training; if it is set, ``NonFiniteLossError`` ends the run. The
trade-off: the run may continue up to ``check_every_n_steps - 1`` steps on NaN weights before it
stops (wasted compute, never a wasted checkpoint: the check before each save guarantees no
checkpoint, ``last.ckpt`` included, is written after the first bad step, and ``SafeCheckpointIO``
independently refuses any ``state_dict`` holding NaN/inf). Under DDP the flag is OR-reduced over
ranks at those points, so every rank stops together.

``skip`` drops the optimizer update of any step whose loss or gradients are non-finite: the
gradients are set to ``None``, so the optimizer leaves those parameters and their state alone
(the LR scheduler still advances). Deciding whether to step needs the answer on the host before
``optimizer.step``, so ``skip`` pays one host sync per optimizer step (a scalar; on GPU it
waits for the backward pass, which the optimizer step would wait for anyway). More than
``max_consecutive_skips`` skipped steps in a row means the run has diverged: it stops as above.
Skipped steps are counted in ``train/nonfinite_skips``.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Checkpoint
from torch import Tensor

from src.errors import NonFiniteLossError

ACTIONS = ("stop", "skip")


class NonFiniteGuard(pl.Callback):
    """Detects a NaN/inf training loss and stops the run or skips the update (module docstring)."""

    def __init__(
        self, action: str = "stop", check_every_n_steps: int = 50, max_consecutive_skips: int = 10
    ) -> None:
        if action not in ACTIONS:
            raise ValueError(
                f"reliability.nonfinite={action!r} is invalid: use one of {', '.join(ACTIONS)}"
            )
        self.action = action
        self.check_every_n_steps = max(1, int(check_every_n_steps))
        self.max_consecutive_skips = max(1, int(max_consecutive_skips))
        self._bad: Tensor | None = (
            None  # on device: a non-finite loss since the last check (stop) / in this step (skip)
        )
        self._first_bad: Tensor | None = (
            None  # on device: global_step of the first bad loss, -1 if none
        )
        self.skipped = 0  # skipped updates over the run (saved in checkpoints)
        self._consecutive = 0

    # ------------------------------------------------------------ accumulate, on device
    def on_before_backward(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, loss: Tensor
    ) -> None:
        bad = ~torch.isfinite(loss.detach()).all()
        # a fill, no copy or sync
        step = torch.full((), trainer.global_step, dtype=torch.long, device=bad.device)
        if self._bad is None or self._first_bad is None:
            self._bad, self._first_bad = bad, torch.where(bad, step, torch.full_like(step, -1))
        else:
            self._first_bad = torch.where(bad & ~self._bad, step, self._first_bad)
            self._bad = self._bad | bad

    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        if self.action != "skip":
            return
        grads = [
            p.grad
            for group in optimizer.param_groups
            for p in group["params"]
            if p.grad is not None
        ]
        bad = self._bad if self._bad is not None else torch.zeros((), dtype=torch.bool)
        if grads:
            norms = torch._foreach_norm(grads)
            bad = bad.to(norms[0].device) | ~torch.isfinite(torch.stack(norms)).all()
        self._bad = self._first_bad = None
        # the one sync per step
        if not trainer.strategy.reduce_boolean_decision(bool(bad), all=False):
            self._consecutive = 0
            return
        optimizer.zero_grad(set_to_none=True)  # the optimizer skips parameters without gradients
        self.skipped += 1
        self._consecutive += 1
        if self._consecutive > self.max_consecutive_skips:
            raise NonFiniteLossError(
                f"non-finite training loss (NaN/inf) at {self._consecutive} consecutive steps (the "
                f"last at step {trainer.global_step}; "
                f"reliability.max_consecutive_skips={self.max_consecutive_skips}); the run has "
                f"diverged and stopped. Last good checkpoint: {_last_good(trainer)}. Fixes: lower "
                "optim.lr or raise scheduler.warmup_steps, keep trainer.gradient_clip_val; then "
                "resume with ckpt_path=<that checkpoint>"
            )

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if self.action == "skip":
            pl_module.log(
                "train/nonfinite_skips", float(self.skipped), on_step=True, on_epoch=False
            )
        elif trainer.global_step % self.check_every_n_steps == 0:
            self.check(trainer)

    # ------------------------------------------------------------ read on the host, at boundaries
    def check(self, trainer: pl.Trainer) -> None:
        """Raise ``NonFiniteLossError`` if any rank saw a non-finite loss since training
        (re)started."""
        if self.action != "stop":
            return
        local = self._bad if self._bad is not None else torch.zeros((), dtype=torch.bool)
        if not trainer.strategy.reduce_boolean_decision(bool(local), all=False):
            return
        first = (
            int(self._first_bad)
            if self._first_bad is not None and bool(self._bad)
            else trainer.global_step
        )
        raise NonFiniteLossError(
            f"non-finite training loss (NaN/inf) at step {first}; the run stopped "
            "(reliability.nonfinite=stop) and no checkpoint was written after it. Last good "
            f"checkpoint: {_last_good(trainer)}. Fixes: lower optim.lr or raise "
            "scheduler.warmup_steps, keep trainer.gradient_clip_val, prefer bf16-mixed to "
            "16-mixed, or set reliability.nonfinite=skip to drop such updates; then resume with "
            "ckpt_path=<that checkpoint>"
        )

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking and trainer.state.fn == "fit":
            self.check(trainer)

    def on_save_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        self.check(trainer)  # raising here aborts the save: the previous file stays

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.check(trainer)

    def state_dict(self) -> dict[str, Any]:
        return {"skipped": self.skipped}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.skipped = int(state_dict.get("skipped", 0))


def _last_good(trainer: pl.Trainer) -> str:
    for cb in trainer.callbacks:  # type: ignore[attr-defined]
        if isinstance(cb, Checkpoint):
            path = getattr(cb, "last_model_path", "") or getattr(cb, "best_model_path", "")
            if path:
                return str(path)
    return "none (no checkpoint was written before the problem)"
