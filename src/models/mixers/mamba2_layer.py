"""The Mamba-2 mixer (``model/mixer=mamba2``; Dao & Gu 2024, arXiv:2405.21060, §7 and Fig. 6).

Legend: ``B`` batch, ``T`` length, ``C`` model dim, ``E`` = expand · C inner dim, ``H`` heads,
``P`` = E / H head dim, ``G`` groups of B/C, ``N`` state size, ``K`` conv kernel.

One projection gives the gate z, the SSM input x, B, C (shared by the heads of a group, like
keys in grouped-query attention) and one Δ per head; a causal depthwise convolution and SiLU
act on (x, B, C); the SSD core (ssd.py) mixes the sequence; then a D skip, the gated RMSNorm
norm(y ⊙ silu(z)) per group, and the output projection::

    x ─ in_proj ─┬─ z ───────────────────────────────────────┐
                 ├─ (x, B, C) ─ conv1d ─ SiLU ─ SSD(A, Δ) + D·x ─ norm(· ⊙ silu z) ─ out_proj
                 └─ Δ ─ softplus(· + dt_bias) ──┘

A = −exp(A_log) [H]. The parameter names are those of transformers' ``Mamba2Mixer`` (in_proj,
conv1d, dt_bias, A_log, D, norm.weight, out_proj) with its in_proj order [z, x, B, C, Δ], so
its weights load by name. The state is ``Mamba2State(conv [B, E + 2GN, K − 1], ssm [B, H, P,
N])``, a plain tuple to the KV cache.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from src.errors import ConfigError
from src.models.components.flops import linear_flops
from src.models.mixers import ssd
from src.models.mixers.base import MIXERS, SequenceMixer, check_positive


def causal_conv(conv: nn.Conv1d, x: Tensor, state: Tensor | None) -> tuple[Tensor, Tensor]:
    """A depthwise ``conv`` (no padding of its own) run causally: x [B, T, D] after the last
    K − 1 inputs ``state`` [B, D, K − 1] (None: zeros, an empty past) -> (SiLU(conv) [B, T, D],
    the new last K − 1 inputs). Mamba's short convolution; FLOPs 2·B·T·D·K."""
    K = conv.kernel_size[0]
    xt = x.transpose(1, 2)  # [B, T, D] -> [B, D, T]
    past = xt.new_zeros(*xt.shape[:2], K - 1) if state is None else state.to(xt.dtype)
    full = torch.cat([past, xt], dim=2)  # [B, D, K − 1 + T]
    y = F.silu(conv(full)).transpose(1, 2)  # [B, D, T] -> [B, T, D]
    return y, full[:, :, full.shape[2] - (K - 1) :]


def inverse_softplus_dt(n: int, dt_min: float = 1e-3, dt_max: float = 0.1) -> Tensor:
    """dt_bias such that softplus(dt_bias) is log-uniform in [dt_min, dt_max] (Mamba's init,
    Gu & Dao 2023 §3.6; floored at 1e-4)."""
    dt = torch.exp(torch.rand(n) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
    dt = dt.clamp(min=1e-4)
    return dt + torch.log(-torch.expm1(-dt))  # softplus⁻¹(dt)


class Mamba2State(NamedTuple):
    conv: Tensor  # the last K − 1 inputs of the conv: [B, E + 2GN, K − 1]
    ssm: Tensor  # the SSD state: [B, H, P, N]


class GroupedGatedRMSNorm(nn.Module):
    """Mamba-2's output norm: RMSNorm(y ⊙ silu(z)) over each of G groups of channels (the gate
    before the norm), one weight per channel [E]; float32 inside (transformers'
    ``Mamba2RMSNormGated``)."""

    def __init__(self, dim: int, n_groups: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.n_groups, self.eps = n_groups, eps

    def forward(self, y: Tensor, z: Tensor) -> Tensor:
        dtype = y.dtype
        h = y.float() * F.silu(z.float())  # [B, T, E]
        h = h.unflatten(-1, (self.n_groups, -1))  # [B, T, G, E/G]
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.flatten(-2).to(dtype)  # [B, T, E]


@MIXERS.register("mamba2")
class Mamba2(SequenceMixer):
    """Mamba-2 (SSD): heads of size P over an inner dim E = expand · C, B/C in G groups."""

    display = "Mamba-2 (SSD)"
    #: transformers' ``Mamba2Config.layer_norm_epsilon`` default and mamba_ssm's
    norm_eps = 1e-5

    def __init__(
        self,
        d_model: int,
        n_head: int,
        d_state: int = 128,
        d_conv: int = 4,
        expand: int = 2,
        head_dim: int | None = None,
        n_groups: int = 1,
        chunk_size: int = 64,
    ) -> None:
        super().__init__()
        E = expand * d_model
        P = E // n_head if head_dim is None else head_dim
        H = E // P
        self.d_model, self.d_inner, self.n_heads, self.head_dim = d_model, E, H, P
        self.d_state, self.n_groups, self.d_conv, self.chunk_size = (
            d_state,
            n_groups,
            d_conv,
            chunk_size,
        )
        self.display = f"Mamba-2 (SSD, {H} heads × {P}, state {d_state}, {n_groups} group(s))"
        self.conv_dim = E + 2 * n_groups * d_state
        self.in_proj = nn.Linear(d_model, E + self.conv_dim + H, bias=False)  # [z, x, B, C, Δ]
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, d_conv, groups=self.conv_dim)
        self.dt_bias = nn.Parameter(inverse_softplus_dt(H))  # [H]
        self.A_log = nn.Parameter(torch.empty(H).uniform_(1, 16).log())  # A ∈ −[1, 16] (mamba_ssm)
        self.D = nn.Parameter(torch.ones(H))  # [H]
        self.norm = GroupedGatedRMSNorm(E, n_groups, self.norm_eps)
        self.out_proj = nn.Linear(E, d_model, bias=False)

    @classmethod
    def check_args(
        cls,
        *,
        d_model: int,
        n_head: int,
        d_state: object = 128,
        d_conv: object = 4,
        expand: object = 2,
        head_dim: object = None,
        n_groups: object = 1,
        chunk_size: object = 64,
        **_: Any,
    ) -> None:
        check_positive(
            "d_state", d_state, "N, the state size of each head's channels; 64-256 in the paper"
        )
        check_positive("d_conv", d_conv, "the short convolution's kernel width; Mamba uses 4")
        check_positive("expand", expand, "the inner width is expand · d_model; Mamba uses 2")
        check_positive("chunk_size", chunk_size, "tokens per chunk of the SSD's parallel form")
        check_positive("n_groups", n_groups, "groups of heads sharing B and C; 1 in the paper")
        E = expand * d_model
        if head_dim is None:
            if E % n_head:
                raise ConfigError(
                    f"model.n_head={n_head} does not divide the inner width expand·d_model={E} "
                    f"(model.mixer.expand={expand}); choose n_head dividing {E} or set "
                    "model.mixer.head_dim"
                )
            heads = n_head
        else:
            check_positive(
                "head_dim", head_dim, "P, the channels of one SSD head; null: E / n_head"
            )
            if E % head_dim:
                raise ConfigError(
                    f"model.mixer.head_dim={head_dim} does not divide the inner width "
                    f"expand·d_model={E}; choose a divisor of {E} or null (E / model.n_head)"
                )
            heads = E // head_dim
        if heads % n_groups:
            raise ConfigError(
                f"model.mixer.n_groups={n_groups} does not divide the {heads} SSD heads; choose "
                f"n_groups dividing {heads}"
            )

    def init_state(self, batch: int, device: torch.device, dtype: torch.dtype) -> Mamba2State:
        conv = torch.zeros(batch, self.conv_dim, self.d_conv - 1, device=device, dtype=dtype)
        ssm_dtype = torch.promote_types(dtype, torch.float32)
        H, P, N = self.n_heads, self.head_dim, self.d_state
        return Mamba2State(conv, torch.zeros(batch, H, P, N, device=device, dtype=ssm_dtype))

    def forward(
        self, x: Tensor, state: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, Mamba2State]:
        """x [B, T, C] -> (y [B, T, C], state). T > 1: the chunked SSD; T = 1: one recurrent step."""
        Bsz, T, _ = x.shape
        E, H, P, G, N = self.d_inner, self.n_heads, self.head_dim, self.n_groups, self.d_state
        conv_state, ssm_state = (None, None) if state is None else state
        z, xbc, dt = self.in_proj(x).split([E, self.conv_dim, H], dim=-1)  # [B, T, E | E+2GN | H]
        xbc, conv_state = causal_conv(self.conv1d, xbc, conv_state)
        xs, Bm, Cm = xbc.split([E, G * N, G * N], dim=-1)
        xs = xs.unflatten(-1, (H, P))  # [B, T, E] -> [B, T, H, P]
        Bm, Cm = Bm.unflatten(-1, (G, N)), Cm.unflatten(-1, (G, N))  # [B, T, G, N]
        dt = F.softplus(dt.float() + self.dt_bias.float())  # Δ > 0: [B, T, H]
        A = -torch.exp(self.A_log.float())  # [H]
        # the scan in float32 even under autocast (its decays and sums lose too much in bf16)
        with torch.autocast(x.device.type, enabled=False):
            if T == 1:
                y, ssm_state = ssd.ssd_recurrent(xs, dt, A, Bm, Cm, initial_state=ssm_state)
            else:
                y, ssm_state = ssd.ssd_chunked(xs, dt, A, Bm, Cm, self.chunk_size, ssm_state)
        y = y + xs * self.D.to(xs.dtype)[:, None]  # the D skip: [B, T, H, P]
        y = self.norm(y.flatten(-2), z)  # [B, T, H, P] -> [B, T, E]
        return self.out_proj(y), Mamba2State(conv_state, ssm_state)

    def forward_flops(self, batch_size: int, seq_len: int) -> int:
        """in_proj, out_proj, the depthwise conv (2·B·T·(E + 2GN)·K) and the SSD's matmuls
        (the chunked form for T > 1, the recurrent step for T = 1); elementwise work not counted."""
        conv = 2 * batch_size * seq_len * self.conv_dim * self.d_conv
        H, P, N = self.n_heads, self.head_dim, self.d_state
        if seq_len == 1:
            core = ssd.recurrent_flops(batch_size, seq_len, H, P, N)
        else:
            core = ssd.chunked_flops(batch_size, seq_len, H, P, self.n_groups, N, self.chunk_size)
        return linear_flops(self, batch_size * seq_len) + conv + core
