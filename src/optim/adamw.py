"""``optim=adamw``: AdamW with nanoGPT's weight-decay groups (``src.optim.base.param_groups``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from src.errors import ConfigError
from src.optim.base import (
    OPTIMIZERS,
    OptimizerConfig,
    check_betas,
    check_weight_decay,
    fused_devices,
    is_number,
    param_groups,
)


@OPTIMIZERS.register("adamw")
@dataclass(frozen=True, kw_only=True)
class AdamW(OptimizerConfig):
    """``optim=adamw``: AdamW (Loshchilov & Hutter 2019, arXiv:1711.05101) with nanoGPT's decay
    groups (``param_groups``). ``fused``: ``auto`` takes PyTorch's fused kernel where it has one."""

    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    decay_embeddings: bool = False
    fused: Literal["auto", True, False] = "auto"

    def __post_init__(self) -> None:
        super().__post_init__()
        # a YAML list, once checked (frozen: the idiom)
        object.__setattr__(self, "betas", check_betas(self.betas))
        if not is_number(self.eps) or self.eps <= 0:
            raise ConfigError(
                f"optim.eps={self.eps!r} is invalid: a small positive number, e.g. optim.eps=1e-8"
            )
        check_weight_decay(self.weight_decay)
        if not isinstance(self.decay_embeddings, bool):
            raise ConfigError(
                f"optim.decay_embeddings={self.decay_embeddings!r} is invalid: true or false"
            )
        if not (isinstance(self.fused, bool) or self.fused == "auto"):  # not `in (…)`: 1 == True
            raise ConfigError(
                f"optim.fused={self.fused!r} is invalid: auto (the fused kernel where PyTorch has "
                "one: CUDA, CPU), true or false"
            )

    def build(
        self, model: nn.Module, device: torch.device, clips_under_mixed_precision: bool = False
    ) -> torch.optim.Optimizer:
        """``fused: auto`` uses PyTorch's fused AdamW kernel on every device that has one (CUDA, and
        CPU since PyTorch 2.4: one kernel over all parameters instead of ~10 small ops per tensor),
        except when ``clips_under_mixed_precision``: Lightning's mixed-precision plugin
        (``trainer.precision=bf16-mixed``/``16-mixed``) refuses to clip gradients for an optimizer
        that unscales them inside its step, which a fused AdamW does; ``auto`` then takes the
        per-tensor loop and ``fused: true`` is an error naming the keys."""
        fused = self.fused
        if fused == "auto":
            fused = device.type in fused_devices() and not clips_under_mixed_precision
        if fused and device.type not in fused_devices():
            raise ConfigError(
                "optim.fused=true needs a device with PyTorch's fused AdamW "
                f"({', '.join(fused_devices())}), but the model is on {device}; set "
                "optim.fused=auto"
            )
        if fused and clips_under_mixed_precision:
            raise ConfigError(
                "optim.fused=true cannot be combined with gradient clipping under mixed precision "
                "(trainer.gradient_clip_val with trainer.precision=bf16-mixed or 16-mixed): "
                "Lightning refuses to clip the gradients of an optimizer that unscales them "
                "itself; set optim.fused=auto or trainer.gradient_clip_val=null"
            )
        groups = param_groups(
            model, float(self.weight_decay), self.decay_embeddings, lr=float(self.lr)
        )
        return torch.optim.AdamW(
            groups,
            lr=float(self.lr),
            betas=(float(self.betas[0]), float(self.betas[1])),
            eps=float(self.eps),
            fused=bool(fused),
        )
