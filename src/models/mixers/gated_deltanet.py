"""The Gated DeltaNet mixer (``model/mixer=gated_deltanet``; Yang, Kautz & Hatamizadeh 2025,
"Gated Delta Networks: Improving Mamba2 with Delta Rule", arXiv:2412.06464, §3.4 and Fig. 1).

Legend: ``B`` batch, ``T`` length, ``C`` model dim, ``H`` heads, ``K`` key/query head dim,
``V`` = expand_v · K value head dim, ``k`` conv kernel.

Per head: q, k, v from linear projections, each through a short causal depthwise convolution and
SiLU, q and k L2-normalised; the writing strength β = sigmoid(W_β x) and the decay α = exp(g)
with Mamba-2's parametrisation g = −exp(A_log) · softplus(W_α x + dt_bias); the gated delta rule
(delta_rule.py) mixes the sequence; each head's output is RMS-normalised and gated by
silu(W_g x) (norm, then gate), and projected back::

    x ─┬─ q_proj, k_proj, v_proj ─ conv1d ─ SiLU ─ (L2 q, k) ─┐
       ├─ b_proj ─ sigmoid ─ β ──────────────────────────────┤ gated delta rule ─ o_norm(·, silu g) ─ o_proj
       ├─ a_proj ─ −exp(A_log)·softplus(· + dt_bias) ─ g ─────┘                        │
       └─ g_proj ──────────────────────────────────────────────────────────────────────┘

The layout follows flash-linear-attention's ``GatedDeltaNet`` (the authors' code: q/k/v/a/b/g/o
projections, ``A_log``, ``dt_bias``, ``o_norm`` with one weight [V] shared by the heads), with
the three short convolutions as one depthwise ``conv1d`` over [q | k | v] like transformers'
Qwen3-Next (the same operation). Query and key heads are equal in number (no grouped values).
The state is ``GatedDeltaNetState(conv [B, 2HK + HV, k − 1], recurrent [B, H, K, V])``, a plain
tuple to the KV cache.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from src.errors import ConfigError
from src.models.components.flops import linear_flops
from src.models.mixers import delta_rule
from src.models.mixers.base import MIXERS, SequenceMixer, check_divides, check_positive
from src.models.mixers.mamba2_layer import causal_conv, inverse_softplus_dt


class GatedDeltaNetState(NamedTuple):
    conv: Tensor  # the last k − 1 inputs of the conv over [q | k | v]: [B, 2HK + HV, k − 1]
    recurrent: Tensor  # the delta rule's state: [B, H, K, V]


def l2_normalize(x: Tensor, eps: float = 1e-6) -> Tensor:
    """x / sqrt(Σx² + eps) over the last dim, in float32 at least (flash-linear-attention's and
    transformers' ``l2norm``)."""
    x = x.to(torch.promote_types(x.dtype, torch.float32))
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps)


class HeadGatedRMSNorm(nn.Module):
    """RMSNorm over each head's V channels, one weight [V] shared by the heads, then the gate
    silu(g) (norm before gate: fla's ``FusedRMSNormGated``, Qwen3-Next's ``RMSNormGated``)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, o: Tensor, gate: Tensor) -> Tensor:
        """o, gate [B, T, H, V] -> [B, T, H, V] in gate's dtype."""
        h = o.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        h = self.weight * h.to(gate.dtype)
        return (h.float() * F.silu(gate.float())).to(gate.dtype)


@MIXERS.register("gated_deltanet")
class GatedDeltaNet(SequenceMixer):
    """Gated DeltaNet: H heads, keys of K = head_dim, values of V = expand_v · K."""

    display = "Gated DeltaNet"
    #: transformers' Qwen3-Next ``rms_norm_eps`` default (its output norm and l2norm)
    norm_eps = 1e-6

    def __init__(
        self,
        d_model: int,
        n_head: int,
        head_dim: int | None = None,
        expand_v: float = 2.0,
        d_conv: int = 4,
        chunk_size: int = 64,
    ) -> None:
        super().__init__()
        K = d_model // n_head if head_dim is None else head_dim
        V = round(K * expand_v)
        H = n_head
        self.n_head, self.k_dim, self.v_dim, self.d_conv, self.chunk_size = (
            H,
            K,
            V,
            d_conv,
            chunk_size,
        )
        self.display = f"Gated DeltaNet ({H} heads, keys {K}, values {V})"
        self.conv_dim = 2 * H * K + H * V
        self.q_proj = nn.Linear(d_model, H * K, bias=False)
        self.k_proj = nn.Linear(d_model, H * K, bias=False)
        self.v_proj = nn.Linear(d_model, H * V, bias=False)
        self.a_proj = nn.Linear(d_model, H, bias=False)  # the decay's input (Mamba-2's Δ)
        self.b_proj = nn.Linear(d_model, H, bias=False)  # β
        self.g_proj = nn.Linear(d_model, H * V, bias=False)  # the output gate
        self.conv1d = nn.Conv1d(
            self.conv_dim, self.conv_dim, d_conv, groups=self.conv_dim, bias=False
        )
        self.A_log = nn.Parameter(torch.empty(H).uniform_(0.01, 16).log())  # Qwen3-Next / fla
        self.dt_bias = nn.Parameter(inverse_softplus_dt(H))  # [H]
        self.o_norm = HeadGatedRMSNorm(V, self.norm_eps)
        self.o_proj = nn.Linear(H * V, d_model, bias=False)

    @classmethod
    def check_args(
        cls,
        *,
        d_model: int,
        n_head: int,
        head_dim: object = None,
        expand_v: object = 2.0,
        d_conv: object = 4,
        chunk_size: object = 64,
        **_: Any,
    ) -> None:
        check_positive(
            "chunk_size", chunk_size, "tokens per chunk of the delta rule's parallel form"
        )
        check_positive("d_conv", d_conv, "the short convolutions' kernel width; the paper uses 4")
        if head_dim is None:
            check_divides(d_model, n_head, "Gated DeltaNet")
            K = d_model // n_head
        else:
            check_positive(
                "head_dim", head_dim, "K, the key dim of one head; null: d_model / n_head"
            )
            K = head_dim
        ok = isinstance(expand_v, (int, float)) and not isinstance(expand_v, bool) and expand_v > 0
        if not ok or not math.isclose(K * expand_v, round(K * expand_v)):
            raise ConfigError(
                f"model.mixer.expand_v={expand_v!r} must be a positive number giving a whole value "
                f"head dim expand_v · {K} (the key head dim); e.g. 1 or 2"
            )

    def init_state(
        self, batch: int, device: torch.device, dtype: torch.dtype
    ) -> GatedDeltaNetState:
        conv = torch.zeros(batch, self.conv_dim, self.d_conv - 1, device=device, dtype=dtype)
        s_dtype = torch.promote_types(dtype, torch.float32)
        S = torch.zeros(batch, self.n_head, self.k_dim, self.v_dim, device=device, dtype=s_dtype)
        return GatedDeltaNetState(conv, S)

    def forward(
        self, x: Tensor, state: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, GatedDeltaNetState]:
        """x [B, T, C] -> (y [B, T, C], state). T > 1: the chunked rule; T = 1: one step."""
        H, K, V = self.n_head, self.k_dim, self.v_dim
        conv_state, S = (None, None) if state is None else state
        qkv = torch.cat(
            [self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1
        )  # [B, T, 2HK + HV]
        qkv, conv_state = causal_conv(self.conv1d, qkv, conv_state)
        q, k, v = qkv.split([H * K, H * K, H * V], dim=-1)
        q, k = (
            l2_normalize(t.unflatten(-1, (H, K)), self.norm_eps) for t in (q, k)
        )  # [B, T, H, K]
        v = v.unflatten(-1, (H, V))  # [B, T, HV] -> [B, T, H, V]
        beta = torch.sigmoid(self.b_proj(x).float())  # [B, T, H]
        g = -self.A_log.float().exp() * F.softplus(self.a_proj(x).float() + self.dt_bias.float())
        # the rule in float32 even under autocast (its decays and solve lose too much in bf16)
        with torch.autocast(x.device.type, enabled=False):
            if x.shape[1] == 1:
                o, S = delta_rule.recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=S)
            else:
                o, S = delta_rule.chunk_gated_delta_rule(q, k, v, g, beta, self.chunk_size, S)
        o = self.o_norm(o, self.g_proj(x).unflatten(-1, (H, V)))  # [B, T, H, V]
        return self.o_proj(o.flatten(-2)), GatedDeltaNetState(
            conv_state, S
        )  # [B, T, HV] -> [B, T, C]

    def forward_flops(self, batch_size: int, seq_len: int) -> int:
        """The projections, the depthwise conv (2·B·T·(2HK + HV)·k) and the delta rule's matmuls
        (chunked for T > 1, the recurrent step for T = 1; its triangular solve and the elementwise
        work are not counted, as torch's counter does not count them)."""
        conv = 2 * batch_size * seq_len * self.conv_dim * self.d_conv
        H, K, V = self.n_head, self.k_dim, self.v_dim
        if seq_len == 1:
            core = delta_rule.recurrent_flops(batch_size, seq_len, H, K, V)
        else:
            core = delta_rule.chunk_flops(batch_size, seq_len, H, K, V, self.chunk_size)
        return linear_flops(self, batch_size * seq_len) + conv + core
