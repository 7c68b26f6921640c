"""``scheduler=inverse_sqrt``: linear warmup, then the learning rate falls as 1/√step (Vaswani et
al. 2017, "Attention Is All You Need", §5.3; fairseq's ``inverse_sqrt``).

Multiplier of ``optim.lr`` at optimiser step ``s`` (counted from 0), ``W = warmup_steps``::

    s < W     (s + 1) / (W + 1)            the linear warmup every schedule here shares
    s >= W    √(max(W, 1) / (s + 1))       ``optim.lr`` around the end of warmup, halved at 4·W

It needs no horizon: a run can be extended without changing its past (as WSD's stable phase).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.optim.lr_scheduler import LRScheduler

from src.optim.base import SCHEDULES, ScheduleLR, Warmup


class InverseSqrtMultiplier:
    """The multiplier for ``ScheduleLR`` (see the module docstring)."""

    def __init__(self, warmup_steps: int) -> None:
        self.warmup_steps = warmup_steps

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / (self.warmup_steps + 1)
        return math.sqrt(max(self.warmup_steps, 1) / (step + 1))


@SCHEDULES.register("inverse_sqrt")
@dataclass(frozen=True, kw_only=True)
class InverseSqrt(Warmup):
    """``scheduler=inverse_sqrt``: warmup, then ``optim.lr · √(W / (step + 1))``."""

    def build(
        self, optimizer: torch.optim.Optimizer, lr: float, max_steps: int | None
    ) -> LRScheduler:
        return ScheduleLR(optimizer, InverseSqrtMultiplier(self.warmup_steps))
