"""Matmul FLOPs, the quantities ``TransformerModel.forward_flops`` adds up.

Counted as ``torch.utils.flop_counter.FlopCounterMode`` counts them: 2 FLOPs per
multiply-add of every matrix product (linear layers, the attention scores ``Q Kᵀ`` and the
weighted sum ``P V`` over the full ``T × S`` grid, causal or not); elementwise work (norms,
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
    batch_size: int, n_head: int, q_len: int, kv_len: int, head_dim: int
) -> int:
    """``Q Kᵀ`` [B, H, T, D] @ [B, H, D, S] and ``P V`` [B, H, T, S] @ [B, H, S, D]: 2 ·
    2·B·H·T·S·D."""
    return 4 * batch_size * n_head * q_len * kv_len * head_dim
