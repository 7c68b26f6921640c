"""A slow step is abandoned on a preemption signal, not finished.

A step that takes minutes (GPT-2 small on a CPU) would hold a SIGTERM for the rest of it: Lightning
stops at the next step boundary (``src.callbacks.preemption``). When the last step took at least
``reliability.abandon_step_after_s`` seconds (10 by default; null: never), ``SlowStep`` keeps the
checkpoint of that step's boundary in memory (``lightning_compat.checkpoint_in_memory``: the dict a
``last.ckpt`` written there would hold; its tensors are the live parameters and optimizer states,
which nothing changes before the next optimizer update). Each block checks the flag before its
forward and after its first gradient; a SIGTERM during the next step's forward or backward raises
``StepAbandoned`` at the next check, and ``Preemption`` writes that boundary: the resume does the
abandoned step again, bit-identically (tests/callbacks/test_preemption.py). The first step of a
fresh run stops the same way, with nothing to write.

One process on a CPU only, without ``compile``: under DDP every rank must stop at the same point, on
a GPU a step is short, and a compiled model would trace the checks.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.utilities.exceptions import SIGTERMException
from torch import Tensor, nn

from src.lightning_compat import checkpoint_in_memory


class StepAbandoned(SIGTERMException):
    """A preemption signal arrived in the middle of a slow step: the step stops where it is."""


class SlowStep:
    """The checks and the boundary checkpoint of one fit; ``Preemption`` calls its methods from the
    matching Lightning hooks."""

    def __init__(self, after_s: float | None = 10.0) -> None:
        self.after_s = after_s
        self._boundary: dict[str, Any] | None = None  # checkpoint of the last slow step's end
        self._checks: list[Any] = []  # hook handles: a check per block, forward and backward
        self._fit: pl.Trainer | None = None
        self._in_step = False  # inside a step's forward or backward (before its update)
        self._cycle_start: float | None = None  # when this optimizer step's first batch began
        self._stepped = False  # the optimizer updated in this batch (not an accumulation)

    def install(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """A check before each block's forward and after each block's first gradient."""
        self.remove()
        self._boundary = None
        compiled = bool((getattr(pl_module, "cfg", None) or {}).get("compile"))
        if (
            self.after_s is None
            or trainer.world_size > 1
            or trainer.strategy.root_device.type != "cpu"
            or compiled
        ):
            return
        self._fit = trainer
        # the blocks: every module held in a ModuleList (each family's layer stacks)
        blocks = [b for m in pl_module.modules() if isinstance(m, nn.ModuleList) for b in m]
        for block in blocks:
            self._checks.append(block.register_forward_pre_hook(self._check))
            first = next((p for p in block.parameters() if p.requires_grad), None)
            if first is not None:
                self._checks.append(first.register_post_accumulate_grad_hook(self._check))

    def remove(self) -> None:
        for handle in self._checks:
            handle.remove()
        self._checks, self._fit, self._in_step = [], None, False

    def _check(self, *_: Any) -> None:
        if self._in_step and self._fit is not None and self._fit.received_sigterm:
            self._in_step = False
            raise StepAbandoned()

    def _abandonable(self, trainer: pl.Trainer) -> bool:
        """A step may stop mid-way when nothing is lost: a fresh run's first step, or the boundary
        before this step is held in memory."""
        if trainer.global_step == 0:
            return trainer.ckpt_path is None
        return self._boundary is not None and self._boundary["global_step"] == trainer.global_step

    def batch_start(self, trainer: pl.Trainer) -> None:
        if self._cycle_start is None:
            self._cycle_start = time.perf_counter()
        self._in_step = bool(self._checks) and self._abandonable(trainer)
        self._check()  # a signal between steps: stop before this one starts

    def before_update(self) -> None:
        self._in_step = False  # the update begins: this step finishes
        self._stepped = True

    def batch_end(self, trainer: pl.Trainer) -> None:
        self._in_step, stepped, self._stepped = False, self._stepped, False
        if not self._checks or self._cycle_start is None or not stepped:
            return  # an accumulation batch: the step goes on
        took, self._cycle_start = time.perf_counter() - self._cycle_start, None
        slow = self.after_s is not None and took >= self.after_s
        # the boundary of a slow step, kept; a fast one is finished on SIGTERM instead
        self._boundary = _frozen(checkpoint_in_memory(trainer)) if slow else None

    def validation_end(self, trainer: pl.Trainer) -> None:
        """A validation at a kept boundary belongs to it (a resume does not repeat it)."""
        if self._boundary is not None and self._boundary["global_step"] == trainer.global_step:
            self._boundary = _frozen(checkpoint_in_memory(trainer))

    def take_boundary(self) -> dict[str, Any] | None:
        """The kept boundary checkpoint (once), or None."""
        boundary, self._boundary = self._boundary, None
        return boundary


def _frozen(checkpoint: Any) -> Any:
    """``checkpoint`` with its containers copied and its tensors kept (they stay unchanged until the
    next update; a callback's list appended to meanwhile must not change what is written)."""
    if isinstance(checkpoint, dict):
        return {k: _frozen(v) for k, v in checkpoint.items()}
    if isinstance(checkpoint, list):
        return [_frozen(v) for v in checkpoint]
    if isinstance(checkpoint, tuple):
        return tuple(_frozen(v) for v in checkpoint)
    if isinstance(checkpoint, Tensor):
        return checkpoint
    return copy.deepcopy(checkpoint)
