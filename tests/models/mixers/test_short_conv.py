"""The gated short convolution (BaseConv): causal, equal to its definition, and stepped with its
state equal to the parallel form."""

from __future__ import annotations

import pytest
import torch

from src.errors import ConfigError
from src.models.mixers.base import MIXERS


def _mixer(d_conv: int = 3):
    torch.manual_seed(0)
    return MIXERS.build({"name": "short_conv", "d_conv": d_conv}, d_model=8, n_head=2).double()


@pytest.mark.parametrize("d_conv", [1, 3, 4])
def test_equals_definition_and_steps(d_conv: int) -> None:
    m = _mixer(d_conv)
    x = torch.randn(2, 9, 8, dtype=torch.float64)
    y, state = m(x)
    # y_t = (Σ_j w_j ⊙ x_{t-j} + b) ⊙ (W x_t + c), x before 0 is zero
    w = m.conv.weight[:, 0]  # [C, d_conv]: w[:, -1] multiplies x_t
    ref = torch.zeros_like(x)
    for t in range(9):
        for j in range(d_conv):
            if t - j >= 0:
                ref[:, t] += w[:, d_conv - 1 - j] * x[:, t - j]
        ref[:, t] += m.conv.bias
    ref = ref * m.gate(x)
    torch.testing.assert_close(y, ref, atol=1e-5, rtol=0)
    steps, s = [], m.init_state(2, x.device, x.dtype)
    for t in range(9):
        out, s = m(x[:, t : t + 1], s)
        steps.append(out)
    torch.testing.assert_close(torch.cat(steps, 1), y, atol=1e-5, rtol=0)
    torch.testing.assert_close(s, state)
    assert state.shape == (2, 8, d_conv - 1)


def test_causal() -> None:
    m = _mixer()
    x = torch.randn(1, 8, 8, dtype=torch.float64)
    x2 = x.clone()
    x2[:, 5:] += 1.0
    torch.testing.assert_close(m(x)[0][:, :5], m(x2)[0][:, :5])


def test_refuses_zero_kernel() -> None:
    with pytest.raises(ConfigError, match=r"model\.mixer\.d_conv=0"):
        MIXERS.check({"name": "short_conv", "d_conv": 0}, d_model=8, n_head=2)
