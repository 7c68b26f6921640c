"""The gated delta rule in three equal forms (Yang, Kautz & Hatamizadeh 2025, "Gated Delta
Networks: Improving Mamba2 with Delta Rule", arXiv:2412.06464, eq. 10 and §3.3).

Legend: ``B`` batch, ``T`` length, ``H`` heads, ``K`` key/query head dim, ``V`` value head dim,
``L`` chunk size, ``N`` number of chunks.

The paper writes the state as a V × K matrix and one step of a head as

    S_t = α_t S_{t-1} (I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ,        o_t = S_t q_t,

with α_t ∈ (0, 1] a decay, β_t ∈ (0, 1) a writing strength. Here (as in flash-linear-attention
and transformers' Qwen3-Next) the state is stored transposed, ``S`` [B, H, K, V] = the paper's
Sᵀ, so one step reads

    S ← α_t S;   S ← S + β_t k_t (v_t − Sᵀ k_t)ᵀ;   o_t = Sᵀ q_t.

The decay is passed as ``g = log α`` [B, T, H] (≤ 0); queries are multiplied by ``scale``
(K^-½ by default), keys and queries are used as given (the layer L2-normalises them).

Forms: ``naive_gated_delta_rule`` (the paper's equation, its V × K state and the matrix
I − β k kᵀ, the reference), ``recurrent_gated_delta_rule`` (one token at a time, used for
generation), ``chunk_gated_delta_rule`` (chunks of L tokens, within a chunk the WY / UT
representation of the product of Householder-like factors, §3.3; training). Each takes an
optional initial state and returns ``(o [B, T, H, V], final state [B, H, K, V])``; they compute
in float32 at least (float64 stays float64) and return ``o`` in the input's dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def _prepare(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, scale: float | None):
    """[B, T, H, *] -> [B, H, T, *] in the compute dtype; queries scaled."""
    dtype = torch.promote_types(q.dtype, torch.float32)
    q, k, v = (x.transpose(1, 2).to(dtype) for x in (q, k, v))  # [B, T, H, D] -> [B, H, T, D]
    g, beta = (x.transpose(1, 2).to(dtype) for x in (g, beta))  # [B, T, H] -> [B, H, T]
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return q * scale, k, v, g, beta


def _initial(state: Tensor | None, q: Tensor, v: Tensor) -> Tensor:
    B, H, _, K = q.shape
    if state is None:
        return q.new_zeros(B, H, K, v.shape[-1])  # [B, H, K, V]
    return state.to(q.dtype)


def naive_gated_delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    initial_state: Tensor | None = None,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """The reference: eq. 10 token by token, with the paper's V × K state and the explicit
    matrix (I − β k kᵀ). q, k [B, T, H, K], v [B, T, H, V], g, beta [B, T, H]."""
    out_dtype = q.dtype
    q, k, v, g, beta = _prepare(q, k, v, g, beta, scale)
    S = _initial(initial_state, q, v).transpose(-1, -2)  # ours [B, H, K, V] -> paper's [B, H, V, K]
    eye = torch.eye(q.shape[-1], dtype=q.dtype, device=q.device)  # [K, K]
    outs = []
    for t in range(q.shape[2]):
        kt, vt, qt = k[:, :, t], v[:, :, t], q[:, :, t]  # [B, H, K], [B, H, V], [B, H, K]
        a, b = g[:, :, t].exp()[..., None, None], beta[:, :, t][..., None, None]  # [B, H, 1, 1]
        householder = eye - b * kt.unsqueeze(-1) * kt.unsqueeze(-2)  # I − β k kᵀ: [B, H, K, K]
        S = a * S @ householder + b * vt.unsqueeze(-1) * kt.unsqueeze(-2)  # [B, H, V, K]
        outs.append((S @ qt.unsqueeze(-1)).squeeze(-1))  # S q: [B, H, V]
    o = torch.stack(outs, dim=2)  # [B, H, T, V]
    return o.transpose(1, 2).to(out_dtype), S.transpose(-1, -2)  # [B, T, H, V], [B, H, K, V]


def recurrent_gated_delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    initial_state: Tensor | None = None,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """One token at a time in O(K·V) per head and step (generation): decay, read the state's
    prediction of v_t, write the β-weighted error (the delta rule), read with q_t. Every product
    is a matmul, so a FLOP counter sees 6·B·H·K·V per token."""
    out_dtype = q.dtype
    q, k, v, g, beta = _prepare(q, k, v, g, beta, scale)
    S = _initial(initial_state, q, v)  # [B, H, K, V]
    outs = []
    for t in range(q.shape[2]):
        kt, qt = k[:, :, t].unsqueeze(-2), q[:, :, t].unsqueeze(-2)  # [B, H, 1, K]
        S = S * g[:, :, t].exp()[..., None, None]  # α_t S
        predicted = kt @ S  # Sᵀ k as a row: [B, H, 1, K] @ [B, H, K, V] -> [B, H, 1, V]
        delta = (v[:, :, t].unsqueeze(-2) - predicted) * beta[:, :, t][..., None, None]
        S = S + kt.transpose(-1, -2) @ delta  # + k δᵀ: [B, H, K, 1] @ [B, H, 1, V]
        outs.append(qt @ S)  # Sᵀ q as a row: [B, H, 1, V]
    o = torch.cat(outs, dim=2)  # [B, H, T, V]
    return o.transpose(1, 2).to(out_dtype), S


def chunk_gated_delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    chunk_size: int = 64,
    initial_state: Tensor | None = None,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Chunks of L tokens (the paper's §3.3, the algorithm of transformers'
    ``torch_chunk_gated_delta_rule``). Inside a chunk, with γ_i the cumulative log-decay from the
    chunk's start and Γ_ij = exp(γ_i − γ_j) (i ≥ j):

        A = strictly-lower(diag(β) K Kᵀ ⊙ Γ)                (the UT system, [L, L])
        U = (I + A)⁻¹ diag(β) V,  W = (I + A)⁻¹ diag(β · e^γ) K  (WY representation)
        V' = U − W S₀                                      (what the chunk writes)
        O = (Q ⊙ e^γ) S₀ + (Q Kᵀ ⊙ Γ ⊙ causal) V'
        S₁ = e^{γ_L} S₀ + (K ⊙ e^{γ_L − γ})ᵀ V'

    so the only sequential work is one state update per chunk. A length that L does not divide is
    padded with inert tokens (k = 0, β = 0, g = 0: the state passes unchanged), then cut.
    Counted FLOPs (matmuls) per head and chunk: 4·L²·K + 2·L²·V + 6·L·K·V; the triangular
    solve (L²·(K + V) multiply-adds) is not seen by torch's counter and not counted.
    """
    out_dtype = q.dtype
    q, k, v, g, beta = _prepare(q, k, v, g, beta, scale)
    S = _initial(initial_state, q, v)  # [B, H, K, V]
    Bsz, H, T, K = q.shape
    L = chunk_size
    pad = (L - T % L) % L
    q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))  # [B, H, T + pad, D]
    g, beta = (F.pad(x, (0, pad)) for x in (g, beta))  # [B, H, T + pad]
    N = (T + pad) // L
    q, k, v = (x.reshape(Bsz, H, N, L, x.shape[-1]) for x in (q, k, v))  # [B, H, N, L, D]
    g, beta = (x.reshape(Bsz, H, N, L) for x in (g, beta))  # [B, H, N, L]

    gamma = g.cumsum(-1)  # γ: [B, H, N, L]
    causal = torch.ones(L, L, dtype=torch.bool, device=q.device).tril()  # i ≥ j
    # Γ_ij = exp(γ_i − γ_j) on and below the diagonal, 0 above (masked before exp: no overflow)
    decay = (gamma.unsqueeze(-1) - gamma.unsqueeze(-2)).masked_fill(~causal, float("-inf")).exp()
    k_beta = k * beta.unsqueeze(-1)  # diag(β) K: [B, H, N, L, K]
    A = (k_beta @ k.transpose(-1, -2)) * decay  # [B, H, N, L, L]; diagonal ignored below
    lhs = A.masked_fill(~causal, 0.0)  # the solve reads the strictly lower part (unit diagonal)
    rhs = torch.cat([v * beta.unsqueeze(-1), k_beta * gamma.exp().unsqueeze(-1)], dim=-1)
    UW = torch.linalg.solve_triangular(lhs, rhs, upper=False, unitriangular=True)
    U, W = UW.split([v.shape[-1], K], dim=-1)  # [B, H, N, L, V], [B, H, N, L, K]
    intra = (q @ k.transpose(-1, -2)) * decay  # Q Kᵀ ⊙ Γ, causal: [B, H, N, L, L]
    q_decayed = q * gamma.exp().unsqueeze(-1)  # Q ⊙ e^γ
    k_to_end = k * (gamma[..., -1:] - gamma).exp().unsqueeze(-1)  # K ⊙ e^{γ_L − γ}
    chunk_decay = gamma[..., -1].exp()[..., None, None]  # e^{γ_L}: [B, H, N, 1, 1]

    outs = []
    for n in range(N):
        v_new = U[:, :, n] - W[:, :, n] @ S  # V' [B, H, L, V]
        outs.append(q_decayed[:, :, n] @ S + intra[:, :, n] @ v_new)  # [B, H, L, V]
        S = S * chunk_decay[:, :, n] + k_to_end[:, :, n].transpose(-1, -2) @ v_new
    o = torch.stack(outs, dim=2).reshape(Bsz, H, N * L, -1)[:, :, :T]  # [B, H, T, V]
    return o.transpose(1, 2).to(out_dtype), S


def chunk_flops(
    batch_size: int, seq_len: int, n_head: int, k_dim: int, v_dim: int, chunk: int
) -> int:
    """The matmul FLOPs ``chunk_gated_delta_rule`` performs (T padded to whole chunks)."""
    N = -(-seq_len // chunk)
    L, K, V = chunk, k_dim, v_dim
    return batch_size * n_head * N * (4 * L * L * K + 2 * L * L * V + 6 * L * K * V)


def recurrent_flops(batch_size: int, seq_len: int, n_head: int, k_dim: int, v_dim: int) -> int:
    """The matmul FLOPs ``recurrent_gated_delta_rule`` performs."""
    return 6 * batch_size * seq_len * n_head * k_dim * v_dim
