"""ReZero (``model.norm_placement=rezero``): no norm, a learned gate per sublayer starting at zero.

::

    x = x + α · f(x),   α a scalar initialised to 0        ... no final norm

Bachlechner et al. 2020 (arXiv:2003.04887, eq. 3): with α = 0 every block is the identity at
initialisation, so the signal and its gradient pass unchanged through any depth, and the model
trains without warmup or normalisation. One α per sublayer (the paper has one per residual
connection); the configured ``model/norm`` is not used by the blocks.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from src.models.components.residual import PLACEMENTS, Residual


@PLACEMENTS.register("rezero")
class ReZero(Residual):
    title = "ReZero"
    final_norm = False
    uses_norm = False
    drawing = ("sublayer", "× α (0 at init)", "add")

    def __init__(self) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(()))

    def forward(
        self, x: Tensor, norm: nn.Module | None, sublayer: Callable[[Tensor], Tensor]
    ) -> Tensor:
        return x + self.alpha * sublayer(x)
