"""``optim=lion``: Lion, EvoLved Sign Momentum (Chen et al. 2023, "Symbolic Discovery of
Optimization Algorithms", arXiv:2302.06675, Algorithm 2).

Per parameter, with momentum ``m`` (zero at the start)::

    θ ← θ · (1 − lr·λ)                       decoupled weight decay (the decayed group only)
    θ ← θ − lr · sign(β1·m + (1 − β1)·g)     the update: a sign, so every entry moves by lr
    m ← β2·m + (1 − β2)·g

The sign makes each update's RMS 1, larger than AdamW's, so Lion wants an lr 3-10x smaller and a
weight decay 3-10x larger than AdamW's (the paper, §5). Its steps equal the ``lion-pytorch``
package's (tests/optim/test_lion.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from src.optim.base import (
    OPTIMIZERS,
    OptimizerConfig,
    check_betas,
    check_weight_decay,
    param_groups,
)


class Lion(torch.optim.Optimizer):
    """Lion over ``params`` (tensors or groups with their own ``lr``/``weight_decay``)."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.99),
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, wd = group["lr"], group["weight_decay"]
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                m = state["exp_avg"]
                if wd:
                    p.mul_(1.0 - lr * wd)
                # sign(β1·m + (1−β1)·g)
                p.add_(m.mul(beta1).add_(p.grad, alpha=1.0 - beta1).sign_(), alpha=-lr)
                m.mul_(beta2).add_(p.grad, alpha=1.0 - beta2)  # β2·m + (1−β2)·g
        return loss


@OPTIMIZERS.register("lion")
@dataclass(frozen=True, kw_only=True)
class LionConfig(OptimizerConfig):
    """``optim=lion``: Lion with nanoGPT's decay groups."""

    betas: tuple[float, float] = (0.9, 0.99)
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "betas", check_betas(self.betas, "[0.9,0.99]"))
        check_weight_decay(self.weight_decay)

    def build(
        self, model: nn.Module, device: torch.device, clips_under_mixed_precision: bool = False
    ) -> Lion:
        return Lion(
            param_groups(model, float(self.weight_decay), lr=float(self.lr)),
            lr=float(self.lr),
            betas=self.betas,
        )
