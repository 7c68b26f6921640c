"""RMSNorm with a unit offset (``model/norm=gemma_rmsnorm``): x / rms(x) · (1 + g), g from 0.

Gemma (Gemma Team 2024, arXiv:2403.08295; Gemma 2, arXiv:2408.00118) stores the gain as an
offset from one, initialised at zero, so weight decay pulls the gain towards 1 rather than 0.
The function equals ``rmsnorm`` with weight 1 + g; the parameter is stored as Gemma stores it,
so its checkpoints load bit for bit. Computed in float32 and cast back after the gain, as
Gemma's ``(x * (1 + w)).to(dtype)`` (Llama casts before it).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from src.models.components.norms import NORMS


@NORMS.register("gemma_rmsnorm")
class GemmaRMSNorm(nn.Module):
    display = "RMSNorm (1 + g)"

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(d_model))  # the offset g: the gain is 1 + g

    def forward(self, x: Tensor) -> Tensor:  # [..., C] -> [..., C]
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x32 * (1.0 + self.weight.float())).to(x.dtype)
