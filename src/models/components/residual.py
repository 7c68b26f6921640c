"""Where the norm sits around each sublayer (``model.norm_placement=pre|post``).

::

    pre  (GPT-2, Llama):        x = x + f(norm(x))      ... final norm before the head
    post (2017, BERT):          x = norm(x + f(x))      "Add & Norm", no final norm

Xiong et al. 2020 (arXiv:2002.04745) show post-norm needs learning-rate warmup because
its gradients near the output are large at initialisation; pre-norm's are not.
"""
from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from src.registry import Registry

PLACEMENTS: Registry["Placement"] = Registry("norm_placement")


class Placement(nn.Module):
    """Stateless wrapper: combines the residual stream, a norm and a sublayer."""

    #: Whether a stack of such blocks ends with a final norm (``ln_f``).
    final_norm: bool = False

    def forward(self, x: Tensor, norm: nn.Module, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        raise NotImplementedError


@PLACEMENTS.register("pre")
class PreNorm(Placement):
    final_norm = True

    def forward(self, x: Tensor, norm: nn.Module, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        return x + sublayer(norm(x))


@PLACEMENTS.register("post")
class PostNorm(Placement):
    final_norm = False

    def forward(self, x: Tensor, norm: nn.Module, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        return norm(x + sublayer(x))
