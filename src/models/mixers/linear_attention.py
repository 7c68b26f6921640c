"""Causal linear attention (``model/mixer=linear_attention``).

Katharopoulos et al. 2020, "Transformers are RNNs" (arXiv:2006.16236), §3.2 eq. 4-6 and §3.4
eq. 16-20: softmax's similarity exp(q·k) is replaced by a kernel φ(q)·φ(k), so causal attention
becomes a recurrence over a state S (F × D per head) and a normaliser z (F per head)::

    S_t = S_{t-1} + φ(k_t) v_tᵀ,   z_t = z_{t-1} + φ(k_t),
    y_t = φ(q_t)ᵀ S_t / (φ(q_t)ᵀ z_t + ε)                      (``normalize``; else the numerator)

Feature maps (``feature_map``): ``elu1`` φ(x) = elu(x) + 1 (Katharopoulos §3.2.1); ``identity``;
``taylor``, Based's second-order Taylor map φ(x) = [1, x / d^¼, vec(x xᵀ) / (√2 · √d)], so that
φ(q)·φ(k) = 1 + q·k/√d + (q·k)²/(2d) ≈ exp(q·k/√d) (Arora et al. 2024, "Simple linear attention
language models balance the recall-throughput tradeoff", arXiv:2402.18668, §4.1). q and k have
``feature_dim`` channels per head (Based: 16), v has d_model / n_head.

Three forms, equal up to rounding (tests/models/mixers/test_linear_attention.py):
``recurrent`` steps the recurrence; ``chunked`` (Yang et al. 2024, GLA §3.2's chunkwise form)
splits T into chunks of ``chunk_size`` (the last may be shorter), attends within a chunk with a
causal mask and reads the earlier chunks from the carried state; ``reference`` is the quadratic
form y_t = Σ_{s≤t} (φ(q_t)·φ(k_s)) v_s / Σ_{s≤t} φ(q_t)·φ(k_s), straight from eq. 4.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from src.errors import ConfigError
from src.models.components.flops import linear_flops
from src.models.mixers.base import MIXERS, SequenceMixer, check_divides, check_positive

FEATURE_MAPS = ("elu1", "identity", "taylor")
EPS = 1e-6  # the normaliser's ε (every form adds it the same way)

LinearState = tuple[Tensor, Tensor]  # S [B, H, F', D], z [B, H, F']


def feature_size(feature_map: str, feature_dim: int) -> int:
    """F' = the width φ maps ``feature_dim`` channels to (1 + f + f² for the Taylor map)."""
    return 1 + feature_dim + feature_dim**2 if feature_map == "taylor" else feature_dim


def feature(x: Tensor, feature_map: str) -> Tensor:
    """φ(x): [..., f] -> [..., F']."""
    if feature_map == "elu1":
        return F.elu(x) + 1.0
    if feature_map == "identity":
        return x
    f = x.shape[-1]
    outer = (x[..., :, None] * x[..., None, :]).flatten(-2)  # [..., f, f] -> [..., f²]
    return torch.cat(
        [torch.ones_like(x[..., :1]), x / f**0.25, outer / (math.sqrt(2.0) * math.sqrt(f))], dim=-1
    )


def _normalise(num: Tensor, den: Tensor | None) -> Tensor:
    """num [B, H, T, D] / (den [B, H, T] + ε); no normaliser: num."""
    return num if den is None else num / (den[..., None] + EPS)


def recurrent(
    q: Tensor, k: Tensor, v: Tensor, state: LinearState, normalize: bool = True
) -> tuple[Tensor, LinearState]:
    """φ-mapped q, k [B, H, T, F'], v [B, H, T, D], state (S [B, H, F', D], z [B, H, F']) ->
    (y [B, H, T, D], new state): one step of eq. 18-20 per token."""
    S, z = state
    ys = []
    for t in range(q.shape[2]):
        kt, vt, qt = k[:, :, t], v[:, :, t], q[:, :, t]  # [B, H, F'], [B, H, D], [B, H, F']
        S = S + kt[..., :, None] * vt[..., None, :]  # [B, H, F', D]
        z = z + kt
        num = (qt[..., None, :] @ S).squeeze(-2)  # [B, H, 1, F'] @ [B, H, F', D] -> [B, H, D]
        den = (qt * z).sum(-1) if normalize else None  # [B, H]
        ys.append(num if den is None else num / (den[..., None] + EPS))
    return torch.stack(ys, dim=2), (S, z)  # [B, H, T, D]


def chunked(
    q: Tensor, k: Tensor, v: Tensor, state: LinearState, chunk_size: int, normalize: bool = True
) -> tuple[Tensor, LinearState]:
    """The chunkwise parallel form: same arguments and result as ``recurrent``."""
    S, z = state
    T = q.shape[2]
    ys = []
    for s in range(0, T, chunk_size):
        qc, kc, vc = (
            q[:, :, s : s + chunk_size],
            k[:, :, s : s + chunk_size],
            v[:, :, s : s + chunk_size],
        )
        c = qc.shape[2]
        causal = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()  # [c, c]
        a = (qc @ kc.transpose(-1, -2)).masked_fill(~causal, 0.0)  # [B, H, c, c]
        num = a @ vc + qc @ S  # intra [B, H, c, D] + inter [B, H, c, F'] @ [B, H, F', D]
        den = a.sum(-1) + (qc * z[:, :, None]).sum(-1) if normalize else None  # [B, H, c]
        ys.append(_normalise(num, den))
        S = S + kc.transpose(-1, -2) @ vc  # [B, H, F', c] @ [B, H, c, D] -> [B, H, F', D]
        z = z + kc.sum(2)  # [B, H, F']
    return torch.cat(ys, dim=2), (S, z)


def reference(q: Tensor, k: Tensor, v: Tensor, normalize: bool = True) -> Tensor:
    """Katharopoulos et al. eq. 4 with a causal sum, from scratch (no state): [B, H, T, D]."""
    T = q.shape[2]
    sim = torch.einsum("bhtf,bhsf->bhts", q, k)  # φ(q_t)·φ(k_s)  [B, H, T, T]
    sim = sim * torch.ones(T, T, dtype=q.dtype, device=q.device).tril()  # s ≤ t only
    num = torch.einsum("bhts,bhsd->bhtd", sim, v)
    return num / (sim.sum(-1, keepdim=True) + EPS) if normalize else num


@MIXERS.register("linear_attention")
class LinearAttention(SequenceMixer):
    """Causal linear attention with a feature map (module docstring): q, k to ``feature_dim``
    channels per head, v and the output at d_model / n_head, an output projection."""

    display = "linear attention"

    def __init__(
        self,
        d_model: int,
        n_head: int,
        feature_map: str = "elu1",
        feature_dim: int | None = None,
        chunk_size: int = 64,
        normalize: bool = True,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.n_head, self.head_dim = n_head, d_model // n_head
        self.feature_map, self.chunk_size, self.normalize = feature_map, chunk_size, normalize
        self.feature_dim = feature_dim or self.head_dim
        self.n_features = feature_size(feature_map, self.feature_dim)  # F'
        self.display = f"linear attention ({feature_map})"
        self.q_proj = nn.Linear(d_model, n_head * self.feature_dim, bias=bias)
        self.k_proj = nn.Linear(d_model, n_head * self.feature_dim, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    @classmethod
    def check_args(
        cls,
        *,
        d_model: int,
        n_head: int,
        feature_map: object = "elu1",
        feature_dim: object = None,
        chunk_size: object = 64,
        normalize: object = True,
        **_: Any,
    ) -> None:
        if feature_map not in FEATURE_MAPS:
            raise ConfigError(
                f"model.mixer.feature_map={feature_map!r} is not known; use "
                f"{', '.join(FEATURE_MAPS)}"
            )
        check_positive("chunk_size", chunk_size, "tokens per chunk of the parallel form")
        if feature_dim is not None:
            check_positive("feature_dim", feature_dim, "q/k channels per head, or null")
        check_divides(d_model, n_head, "linear_attention")
        if feature_map == "identity" and normalize:
            raise ConfigError(
                "model.mixer.feature_map=identity with model.mixer.normalize=true divides by "
                "φ(q)·Σφ(k), which can be 0 or negative; set model.mixer.normalize=false"
            )

    def _heads(self, x: Tensor, d: int) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.n_head, d).transpose(1, 2)  # [B, T, H·d] -> [B, H, T, d]

    def init_state(self, batch: int, device: torch.device, dtype: torch.dtype) -> LinearState:
        """Zeros, in float32 at least (the sums of a long sequence lose too much in bf16)."""
        H, Fp, D = self.n_head, self.n_features, self.head_dim
        dtype = torch.promote_types(dtype, torch.float32)
        return (
            torch.zeros(batch, H, Fp, D, device=device, dtype=dtype),
            torch.zeros(batch, H, Fp, device=device, dtype=dtype),
        )

    def forward(self, x: Tensor, state: LinearState | None = None) -> tuple[Tensor, LinearState]:
        """x [B, T, C] -> (y [B, T, C], (S [B, H, F', D], z [B, H, F']))."""
        B, T, C = x.shape
        if state is None:
            state = self.init_state(B, x.device, x.dtype)
        q, k = (
            self._heads(self.q_proj(x), self.feature_dim),
            self._heads(self.k_proj(x), self.feature_dim),
        )
        v = self._heads(self.v_proj(x), self.head_dim)  # [B, H, T, D]
        # the feature map and the sums in float32 even under autocast, as the state
        with torch.autocast(x.device.type, enabled=False):
            wide = state[0].dtype
            q, k = (feature(t.to(wide), self.feature_map) for t in (q, k))  # [B, H, T, F']
            if T == 1:
                y, state = recurrent(q, k, v.to(wide), state, self.normalize)
            else:
                y, state = chunked(q, k, v.to(wide), state, self.chunk_size, self.normalize)
        y = y.to(v.dtype).transpose(1, 2).reshape(B, T, C)  # [B, H, T, D] -> [B, T, C]
        return self.out(y), state

    def forward_flops(self, batch_size: int, seq_len: int) -> int:
        """Projections plus, per head: one step's φ(q)ᵀS (T = 1); per chunk of c tokens the
        intra-chunk scores and their sum with v (2·c²·(F' + D)), the read of the state
        (2·c·F'·D) and its update (2·c·F'·D)."""
        flops = linear_flops(self, batch_size * seq_len)
        Fp, D, BH = self.n_features, self.head_dim, batch_size * self.n_head
        if seq_len == 1:
            return flops + BH * 2 * Fp * D
        for s in range(0, seq_len, self.chunk_size):
            c = min(self.chunk_size, seq_len - s)
            flops += BH * (2 * c * c * (Fp + D) + 4 * c * Fp * D)
        return flops
