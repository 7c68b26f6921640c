"""The gated short convolution (``model/mixer=short_conv``).

BaseConv of Arora et al. 2023, "Zoology: Measuring and improving recall in efficient language
models" (arXiv:2312.04927), §4 and their ``BaseConv`` (conv_type short): a causal depthwise
convolution of kernel ``d_conv`` gated by a linear projection of the same input,

    y_t = (Σ_{j<d_conv} w_j ⊙ x_{t-j} + b) ⊙ (W x_t + c),

the block's residual around it (their ``resid``). It sees only the last ``d_conv`` tokens, so it
cannot do associative recall over a long context (Zoology §3): the smallest mixer to compare.
Its state is the last d_conv - 1 inputs [B, C, d_conv - 1]; the parallel form pads with zeros,
which is the state of an empty prefix, so both forms are one computation.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from src.models.components.flops import linear_flops
from src.models.mixers.base import MIXERS, SequenceMixer, check_positive


@MIXERS.register("short_conv")
class ShortConv(SequenceMixer):
    """Causal depthwise conv (kernel ``d_conv``) ⊙ a linear gate (BaseConv, Zoology)."""

    display = "gated short convolution"

    def __init__(self, d_model: int, n_head: int, d_conv: int = 4, bias: bool = True) -> None:
        super().__init__()
        self.d_model, self.d_conv = d_model, d_conv
        self.display = f"gated short convolution (kernel {d_conv})"
        # depthwise: one kernel per channel, no padding (the state supplies the past)
        self.conv = nn.Conv1d(d_model, d_model, d_conv, groups=d_model, bias=bias)
        self.gate = nn.Linear(d_model, d_model, bias=bias)

    @classmethod
    def check_args(cls, *, d_model: int, n_head: int, d_conv: object = 4, **_: Any) -> None:
        check_positive("d_conv", d_conv, "the convolution's kernel width, tokens; Zoology uses 3-4")

    def init_state(self, batch: int, device: torch.device, dtype: torch.dtype) -> Tensor:
        return torch.zeros(batch, self.d_model, self.d_conv - 1, device=device, dtype=dtype)

    def forward(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """x [B, T, C] -> (y [B, T, C], the last d_conv - 1 inputs [B, C, d_conv - 1])."""
        B, T, C = x.shape
        xt = x.transpose(1, 2)  # [B, T, C] -> [B, C, T]
        if state is None:
            full = F.pad(xt, (self.d_conv - 1, 0))  # [B, C, d_conv - 1 + T]: an empty past
        else:
            full = torch.cat([state, xt], dim=2)  # [B, C, d_conv - 1 + T]
        conv = self.conv(full).transpose(1, 2)  # [B, C, T] -> [B, T, C]
        new_state = full[:, :, full.shape[2] - (self.d_conv - 1) :]  # [B, C, d_conv - 1]
        return conv * self.gate(x), new_state

    def forward_flops(self, batch_size: int, seq_len: int) -> int:
        """The gate's matmul and the depthwise conv: 2 · B · T · C · d_conv."""
        conv = 2 * batch_size * seq_len * self.d_model * self.d_conv
        return linear_flops(self, batch_size * seq_len) + conv
