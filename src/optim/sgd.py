"""``optim=sgd``: stochastic gradient descent with momentum (Polyak 1964; Nesterov 1983 with
``nesterov: true``; Sutskever et al. 2013), PyTorch's ``torch.optim.SGD``, with nanoGPT's decay
groups. Its weight decay is an L2 term added to the gradient (PyTorch's SGD has no decoupled
one)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from src.errors import ConfigError
from src.optim.base import OPTIMIZERS, OptimizerConfig, check_weight_decay, is_number, param_groups


@OPTIMIZERS.register("sgd")
@dataclass(frozen=True, kw_only=True)
class SGD(OptimizerConfig):
    """``optim=sgd``: momentum SGD."""

    momentum: float = 0.9
    nesterov: bool = False
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not is_number(self.momentum) or not 0 <= self.momentum < 1:
            raise ConfigError(
                f"optim.momentum={self.momentum!r} is invalid: in [0, 1), e.g. optim.momentum=0.9"
            )
        if not isinstance(self.nesterov, bool):
            raise ConfigError(f"optim.nesterov={self.nesterov!r} is invalid: true or false")
        if self.nesterov and self.momentum == 0:
            raise ConfigError(
                "optim.nesterov=true needs optim.momentum > 0 (Nesterov momentum without momentum "
                "is plain SGD); set optim.momentum=0.9 or optim.nesterov=false"
            )
        check_weight_decay(self.weight_decay)

    def build(
        self, model: nn.Module, device: torch.device, clips_under_mixed_precision: bool = False
    ) -> torch.optim.SGD:
        return torch.optim.SGD(
            param_groups(model, float(self.weight_decay), lr=float(self.lr), rule="sgd"),
            lr=float(self.lr),
            momentum=float(self.momentum),
            nesterov=self.nesterov,
        )
