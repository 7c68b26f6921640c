"""Normalisation layers, registered by name (``model/norm=layernorm|rmsnorm``)."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from src.registry import Registry

NORMS: Registry[nn.Module] = Registry("norm", conf="model/norm", package="src.models.components")


@NORMS.register("layernorm")
class LayerNorm(nn.Module):
    """Layer normalisation (Ba et al. 2016) with an optional bias (GPT-2 and BERT have one)."""

    display = "LayerNorm"  # the name diagrams use

    def __init__(self, d_model: int, eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model)) if bias else None

    def forward(self, x: Tensor) -> Tensor:  # [..., C] -> [..., C]
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)


@NORMS.register("rmsnorm")
class RMSNorm(nn.Module):
    """Root-mean-square norm (Zhang & Sennrich 2019): x / rms(x) * g, no centring, no bias.

    Computed in float32 and cast back, as Llama does.
    """

    display = "RMSNorm"

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: Tensor) -> Tensor:  # [..., C] -> [..., C]
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(dtype)
