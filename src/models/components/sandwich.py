"""Sandwich norm (``model.norm_placement=sandwich``): a norm before *and* after each sublayer.

::

    x = x + norm_out(f(norm_in(x)))      ... final norm before the head, as pre-norm

Ding et al. 2021 (CogView, arXiv:2105.13290, §3.1, Fig. 4) add the second LayerNorm at the end of
each residual branch to keep the branch's output scale bounded in deep fp16 training; Kim et al.
2025 (Peri-LN, arXiv:2502.02732) study the same shape at scale. Each sublayer owns its second
norm (``<sublayer>_res.norm``), so a sandwich block has exactly one more norm per sublayer than
a pre-norm block.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from src.models.components.residual import PLACEMENTS, Residual


@PLACEMENTS.register("sandwich")
class SandwichNorm(Residual):
    title = "sandwich norm"
    final_norm = True
    drawing = ("norm", "sublayer", "norm", "add")

    def __init__(self, make_norm: Callable[[], nn.Module]) -> None:
        super().__init__()
        self.norm = make_norm()  # the second norm, on the sublayer's output

    def forward(
        self, x: Tensor, norm: nn.Module | None, sublayer: Callable[[Tensor], Tensor]
    ) -> Tensor:
        return x + self.norm(sublayer(norm(x)))  # type: ignore[misc]

    def norms(self) -> list[nn.Module]:
        return [self.norm]
