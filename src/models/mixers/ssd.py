"""Mamba-2's state-space duality (SSD) in three equal forms (Dao & Gu 2024, "Transformers are
SSMs: Generalized Models and Efficient Algorithms Through Structured State Space Duality",
arXiv:2405.21060, §6 and Listing 1).

Legend: ``B`` batch, ``T`` length, ``H`` heads, ``P`` head dim, ``G`` groups of B/C, ``N`` state
size, ``L`` chunk size, ``Z`` number of chunks.

One head h (in group g = h // (H/G)) with a scalar decay per step:

    h_t = exp(Δ_t A_h) h_{t-1} + Δ_t x_t B_tᵀ        (h_t [P, N]),
    y_t = h_t C_t,

equivalently (the "dual", §3) y = M x with the semiseparable matrix
M_ij = C_iᵀ B_j · Δ_j · exp(Σ_{k=j+1..i} Δ_k A_h) for i ≥ j. ``dt`` [B, T, H] is Δ after the
layer's softplus (> 0), ``A`` [H] is negative, ``x`` [B, T, H, P], ``Bm``/``Cm`` [B, T, G, N],
the state [B, H, P, N] (transformers' ``Mamba2Mixer`` layout). The D skip and the gate belong to
the layer (mamba2.py).

Forms: ``ssd_naive`` (the matrix M, quadratic; the reference), ``ssd_recurrent`` (one token at a
time; generation), ``ssd_chunked`` (the paper's minimal SSD: diagonal blocks by the quadratic
form, chunk states, a scan over chunks, state-to-output). Each returns ``(y [B, T, H, P], final
state [B, H, P, N])``, computing in float32 at least, ``y`` in the input's dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def _prepare(x: Tensor, dt: Tensor, A: Tensor, Bm: Tensor, Cm: Tensor):
    dtype = torch.promote_types(x.dtype, torch.float32)
    x, dt, A, Bm, Cm = (t.to(dtype) for t in (x, dt, A, Bm, Cm))
    return x, dt, A, Bm, Cm


def _initial(state: Tensor | None, x: Tensor, Bm: Tensor) -> Tensor:
    Bsz, _, H, P = x.shape
    if state is None:
        return x.new_zeros(Bsz, H, P, Bm.shape[-1])  # [B, H, P, N]
    return state.to(x.dtype)


def _per_head(t: Tensor, H: int) -> Tensor:
    """[B, T, G, N] -> [B, T, H, N]: head h reads group h // (H/G) (the paper's groups, like
    grouped-query attention)."""
    return t.repeat_interleave(H // t.shape[2], dim=2)


def ssd_naive(
    x: Tensor, dt: Tensor, A: Tensor, Bm: Tensor, Cm: Tensor, initial_state: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """The reference: build M = L ⊙ C Bᵀ (L_ij = exp(Σ_{j<k≤i} Δ_k A) for i ≥ j, else 0) per
    head and multiply, y = M (Δ ⊙ x) + (the initial state read through its decay)."""
    out_dtype = x.dtype
    x, dt, A, Bm, Cm = _prepare(x, dt, A, Bm, Cm)
    Bsz, T, H, P = x.shape
    h0 = _initial(initial_state, x, Bm)
    Bh, Ch = _per_head(Bm, H), _per_head(Cm, H)  # [B, T, H, N]
    a = (dt * A).transpose(1, 2)  # Δ A per step: [B, H, T]
    cum = a.cumsum(-1)  # [B, H, T]
    pos = torch.arange(T, device=x.device)
    i, j = pos.view(T, 1), pos.view(1, T)
    Lmat = torch.where(i >= j, (cum[..., :, None] - cum[..., None, :]), float("-inf")).exp()
    scores = torch.einsum("bihn,bjhn->bhij", Ch, Bh)  # C_iᵀ B_j: [B, H, T, T]
    M = Lmat * scores * dt.transpose(1, 2)[:, :, None, :]  # [B, H, T(i), T(j)]
    y = torch.einsum("bhij,bjhp->bihp", M, x)  # [B, T, H, P]
    y = y + torch.einsum("bihn,bhpn->bihp", Ch, h0) * cum.exp().transpose(1, 2)[..., None]
    # final state: h_T = e^{cum_T} h0 + Σ_j e^{cum_T − cum_j} Δ_j x_j B_jᵀ
    w = (cum[..., -1:] - cum).exp() * dt.transpose(1, 2)  # [B, H, T]
    hT = cum[..., -1].exp()[..., None, None] * h0 + torch.einsum("bhj,bjhp,bjhn->bhpn", w, x, Bh)
    return y.to(out_dtype), hT


def ssd_recurrent(
    x: Tensor, dt: Tensor, A: Tensor, Bm: Tensor, Cm: Tensor, initial_state: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """One token at a time: h ← e^{ΔA} h + Δ x Bᵀ, y = h C (matmuls: 4·B·H·P·N FLOPs a token)."""
    out_dtype = x.dtype
    x, dt, A, Bm, Cm = _prepare(x, dt, A, Bm, Cm)
    H = x.shape[2]
    h = _initial(initial_state, x, Bm)  # [B, H, P, N]
    Bh, Ch = _per_head(Bm, H), _per_head(Cm, H)  # [B, T, H, N]
    ys = []
    for t in range(x.shape[1]):
        dt_t = dt[:, t][..., None, None]  # [B, H, 1, 1]
        xt = x[:, t].unsqueeze(-1)  # [B, H, P, 1]
        h = (dt_t * A[:, None, None]).exp() * h + dt_t * (
            xt @ Bh[:, t].unsqueeze(-2)
        )  # [B, H, P, N]
        ys.append((h @ Ch[:, t].unsqueeze(-1)).squeeze(-1))  # h C: [B, H, P]
    return torch.stack(ys, dim=1).to(out_dtype), h  # [B, T, H, P]


def _segsum(a: Tensor) -> Tensor:
    """a [..., L] -> [..., L, L]: Σ_{j<k≤i} a_k for i ≥ j, −∞ above the diagonal (the paper's
    stable ``segsum``: masked cumulative sums, no difference of large cumulative sums)."""
    L = a.shape[-1]
    a = a[..., None].expand(*a.shape, L)  # [..., L(k), L(j)]
    strict = torch.ones(L, L, dtype=torch.bool, device=a.device).tril(-1)  # k > j
    seg = a.masked_fill(~strict, 0.0).cumsum(dim=-2)  # [..., L(i), L(j)]
    lower = torch.ones(L, L, dtype=torch.bool, device=a.device).tril()
    return seg.masked_fill(~lower, float("-inf"))


def ssd_chunked(
    x: Tensor,
    dt: Tensor,
    A: Tensor,
    Bm: Tensor,
    Cm: Tensor,
    chunk_size: int = 64,
    initial_state: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The paper's Listing 1 ("minimal SSD") in four steps per chunk of L tokens: (1) the
    diagonal blocks by the quadratic form, (2) each chunk's own final state, (3) the states at
    chunk boundaries, (4) each position's read of its chunk's start state. Step 3 is a scan over
    chunks here (the listing's quadratic ``segsum`` over chunks gives the same states). A length
    that L does not divide is padded with inert steps (Δ = 0: no decay, no input), then cut.
    Counted FLOPs (matmuls) per chunk: 2·L²·(G·N + H·P) + 4·H·L·P·N."""
    out_dtype = x.dtype
    x, dt, A, Bm, Cm = _prepare(x, dt, A, Bm, Cm)
    Bsz, T, H, P = x.shape
    G, N = Bm.shape[2], Bm.shape[3]
    h = _initial(initial_state, x, Bm)  # [B, H, P, N]
    L = chunk_size
    pad = (L - T % L) % L
    x, Bm, Cm = (F.pad(t, (0, 0, 0, 0, 0, pad)) for t in (x, Bm, Cm))  # [B, T + pad, *, *]
    dt = F.pad(dt, (0, 0, 0, pad))  # [B, T + pad, H]
    Z = (T + pad) // L
    xz = (x * dt[..., None]).reshape(Bsz, Z, L, G, H // G, P)  # Δ x: [B, Z, L, G, H/G, P]
    Bz, Cz = (t.reshape(Bsz, Z, L, G, N) for t in (Bm, Cm))  # [B, Z, L, G, N]
    a = (dt * A).reshape(Bsz, Z, L, G, H // G).permute(0, 1, 3, 4, 2)  # ΔA: [B, Z, G, H/G, L]
    cum = a.cumsum(-1)  # [B, Z, G, H/G, L]

    # 1. diagonal blocks: Y = (L ⊙ C Bᵀ) ΔX, C Bᵀ once per group
    scores = torch.einsum("bzlgn,bzsgn->bzgls", Cz, Bz)  # [B, Z, G, L, L]
    M = scores.unsqueeze(3) * _segsum(a).exp()  # [B, Z, G, H/G, L, L]
    y = torch.einsum("bzgels,bzsgep->bzlgep", M, xz)  # [B, Z, L, G, H/G, P]
    # 2. each chunk's state from its own inputs: Σ_s e^{cum_L − cum_s} Δ_s x_s B_sᵀ
    to_end = (cum[..., -1:] - cum).exp()  # [B, Z, G, H/G, L]
    B_decayed = Bz.permute(0, 1, 3, 2, 4).unsqueeze(3) * to_end.unsqueeze(
        -1
    )  # [B, Z, G, H/G, L, N]
    local = torch.einsum("bzgesn,bzsgep->bzgepn", B_decayed, xz)  # [B, Z, G, H/G, P, N]
    # 3. states at the chunk boundaries: a scan over chunks
    chunk_decay = cum[..., -1].exp()[..., None, None]  # [B, Z, G, H/G, 1, 1]
    h = h.reshape(Bsz, G, H // G, P, N)
    starts = []
    for z in range(Z):
        starts.append(h)
        h = chunk_decay[:, z] * h + local[:, z]
    start = torch.stack(starts, dim=1)  # [B, Z, G, H/G, P, N]
    # 4. read the chunk's start state: C_l · e^{cum_l} · h_start
    read = torch.einsum("bzlgn,bzgepn->bzlgep", Cz, start)  # [B, Z, L, G, H/G, P]
    y = y + read * cum.exp().permute(0, 1, 4, 2, 3).unsqueeze(-1)
    y = y.reshape(Bsz, Z * L, H, P)[:, :T]  # [B, T, H, P]
    return y.to(out_dtype), h.reshape(Bsz, H, P, N)


def chunked_flops(batch_size: int, seq_len: int, n_head: int, head_dim: int, n_groups: int,
                  d_state: int, chunk: int) -> int:  # fmt: skip
    """The matmul FLOPs ``ssd_chunked`` performs (T padded to whole chunks)."""
    Z = -(-seq_len // chunk)
    L, H, P, G, N = chunk, n_head, head_dim, n_groups, d_state
    return batch_size * Z * (2 * L * L * (G * N + H * P) + 4 * H * L * P * N)


def recurrent_flops(batch_size: int, seq_len: int, n_head: int, head_dim: int, d_state: int) -> int:
    """The matmul FLOPs ``ssd_recurrent`` performs."""
    return 4 * batch_size * seq_len * n_head * head_dim * d_state
