"""Matmul FLOPs, the quantities ``TransformerModel.forward_flops`` adds up.

Counted as ``torch.utils.flop_counter.FlopCounterMode`` counts them: 2 FLOPs per
multiply-add of every matrix product (linear layers, the attention scores ``Q Kᵀ`` and the
weighted sum ``P V`` over the full ``T × S`` grid, causal or not; a sliding window counts
only the keys it shows); elementwise work (norms,
activations, softmax, RoPE, biases) and lookups (embeddings) are not counted.
"""

from __future__ import annotations

from torch import nn


def linear_flops(module: nn.Module, n_tokens: int) -> int:
    """2 · tokens · Σ in·out over every ``nn.Linear`` inside ``module`` (itself included)."""
    return (
        2
        * n_tokens
        * sum(m.in_features * m.out_features for m in module.modules() if isinstance(m, nn.Linear))
    )


def attention_score_flops(
    batch_size: int, n_head: int, q_len: int, kv_len: int, head_dim: int, window: int | None = None
) -> int:
    """``Q Kᵀ`` [B, H, T, D] @ [B, H, D, S] and ``P V`` [B, H, T, S] @ [B, H, S, D]: 2 ·
    2·B·H·T·S·D. With a sliding ``window`` (self-attention, the last T of S positions) only the
    visible keys count: query i sees min(i + 1, W) keys of a sequence starting at 0, so T·S
    becomes Σ_i min(i + 1, W) ≈ T·W (what a windowed kernel computes; the dense SDPA path
    still computes the T × S grid and masks it)."""
    if window is None:
        keys = q_len * kv_len
    else:
        first = kv_len - q_len  # the position of the first query
        keys = _capped_sum(first + q_len, window) - _capped_sum(first, window)
    return 4 * batch_size * n_head * keys * head_dim


def _capped_sum(n: int, cap: int) -> int:
    """Σ_{j=1..n} min(j, cap), in closed form."""
    if n <= cap:
        return n * (n + 1) // 2
    return cap * (cap + 1) // 2 + (n - cap) * cap
