"""``scheduler=cosine|constant|none``: nanoGPT's warmup + cosine decay, warmup + constant, and no
schedule.

* ``cosine`` — linear warmup, then cosine decay from ``lr`` to ``min_lr`` at ``decay_steps``,
  constant after (nanoGPT's ``get_lr``, step ``it`` counted from 0: ``lr·(it+1)/(warmup+1)``;
  Loshchilov & Hutter 2017, arXiv:1608.03983, without restarts).
* ``constant`` — linear warmup, then ``lr``.
* ``none`` — ``lr`` from the first step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.optim.lr_scheduler import LRScheduler

from src.errors import ConfigError
from src.optim.base import SCHEDULES, Schedule, ScheduleLR, Warmup, is_count, is_number


class WarmupCosine:
    """LR multiplier for ``LambdaLR``: linear warmup, cosine to ``min_ratio``, then flat.

    A class (not a closure): picklable, and its settings readable in tests.
    """

    def __init__(
        self, warmup_steps: int, decay_steps: int | None, min_ratio: float, cosine: bool = True
    ) -> None:
        self.warmup_steps = int(warmup_steps)
        self.decay_steps = int(decay_steps) if decay_steps is not None else None
        self.min_ratio = float(min_ratio)
        self.cosine = bool(cosine)

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / (self.warmup_steps + 1)
        if not self.cosine:
            return 1.0
        assert self.decay_steps is not None
        if step > self.decay_steps:
            return self.min_ratio
        span = max(1, self.decay_steps - self.warmup_steps)
        coeff = 0.5 * (1.0 + math.cos(math.pi * (step - self.warmup_steps) / span))  # 1 -> 0
        return self.min_ratio + coeff * (1.0 - self.min_ratio)


@SCHEDULES.register("cosine")
@dataclass(frozen=True, kw_only=True)
class Cosine(Warmup):
    """``scheduler=cosine``: warmup, cosine decay to ``min_lr`` (null = lr/10) at ``decay_steps``
    (null = ``trainer.max_steps``), flat after: nanoGPT's ``get_lr``."""

    decay_steps: int | None = None
    min_lr: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        d = self.decay_steps
        if d is not None and (not is_count(d) or d < 1):
            raise ConfigError(
                f"scheduler.decay_steps={d!r} is invalid: a positive number of optimizer steps, or "
                "null (= trainer.max_steps)"
            )
        if self.min_lr is not None and (not is_number(self.min_lr) or self.min_lr < 0):
            raise ConfigError(
                f"scheduler.min_lr={self.min_lr!r} is invalid: in [0, optim.lr], or null "
                "(= optim.lr / 10)"
            )

    def check_run(self, lr: float, max_steps: int | None) -> None:
        if self.decay_steps is None and (max_steps is None or max_steps <= 0):
            raise ConfigError(
                f"scheduler.decay_steps={self.decay_steps!r} is invalid: scheduler=cosine needs a "
                "horizon: set scheduler.decay_steps, or trainer.max_steps (it defaults to it)"
            )
        if self.min_lr is not None and self.min_lr > lr:
            raise ConfigError(
                f"scheduler.min_lr={self.min_lr!r} is invalid: in [0, optim.lr={lr}], or null "
                "(= optim.lr / 10)"
            )

    def build(
        self, optimizer: torch.optim.Optimizer, lr: float, max_steps: int | None
    ) -> LRScheduler:
        decay_steps = self.decay_steps if self.decay_steps is not None else max_steps
        min_ratio = 0.1 if self.min_lr is None else float(self.min_lr) / lr
        return ScheduleLR(optimizer, WarmupCosine(self.warmup_steps, decay_steps, min_ratio))


@SCHEDULES.register("constant")
@dataclass(frozen=True, kw_only=True)
class Constant(Warmup):
    """``scheduler=constant``: warmup, then ``optim.lr``."""

    def moves_lr(self) -> bool:
        return self.warmup_steps > 0

    def build(
        self, optimizer: torch.optim.Optimizer, lr: float, max_steps: int | None
    ) -> LRScheduler:
        return ScheduleLR(optimizer, WarmupCosine(self.warmup_steps, None, 1.0, cosine=False))


@SCHEDULES.register("none")
@dataclass(frozen=True, kw_only=True)
class NoSchedule(Schedule):
    """``scheduler=none``: ``optim.lr`` from the first step."""

    def moves_lr(self) -> bool:
        return False

    def build(self, optimizer: torch.optim.Optimizer, lr: float, max_steps: int | None) -> None:
        return None
