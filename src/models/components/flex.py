"""The FlexAttention kernel (``model.attn_kernel=flex``): every self-attention pattern as a
``BlockMask`` and a ``score_mod``.

Dong et al. 2024, "Flex Attention: A Programming Model for Generating Optimized Attention
Kernels" (arXiv:2412.05496); ``torch.nn.attention.flex_attention``. A mask is a function
``mask_mod(b, h, q_idx, kv_idx) -> bool`` evaluated once per batch into a ``BlockMask``, which
lists per (query block, key block) of 128 × 128 whether the block is empty, full or partial; a
fused kernel (``torch.compile``) then skips the empty blocks, so a sliding window of W keys costs
T·W memory and work instead of T². A ``score_mod(score, b, h, q_idx, kv_idx)`` changes each score
before the softmax (soft-capping, ALiBi, T5's bias).

The masks are the ones the SDPA path uses: ``mask_mod`` calls each mask's elementwise rule
(``AttentionMask.visible``, components/masks.py) on absolute positions, then ANDs the padding and
the document mask (components/documents.py) and lets every query see the sink tokens
(components/sinks.py), as ``build_bias`` does for SDPA's boolean mask. A learned sink logit b_h
(gpt-oss) is applied after the kernel from its log-sum-exp: with L = log Σ_j exp(s_j),

    Σ_j exp(s_j) v_j / (exp(b_h) + Σ_j exp(s_j)) = out · sigmoid(L − b_h),

exact, so the row's probabilities sum to 1 − the sink's share as on the explicit path.

What torch 2.13 (CPU build) does, measured here: FlexAttention runs on CPU eagerly (an unfused
implementation that materialises the T × S scores, with a warning) and under ``torch.compile``
(a fused C++ kernel); it has **no backward on CPU** ("FlexAttention does not support backward on
CPU"), so ``flex`` trains on a GPU only and ``flex_attend`` refuses a CPU forward that needs
gradients in one line; and its compiled CPU kernel returns no log-sum-exp ("return_lse is not
supported yet"), so a learned sink logit on CPU runs the eager implementation. ``flex_attend``
otherwise uses the compiled kernel (``COMPILE``; inside a compiled model the plain function,
which the outer compile fuses).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from src.errors import ConfigError

try:  # torch >= 2.5
    from torch.nn.attention.flex_attention import (
        AuxRequest,
        BlockMask,
        create_block_mask,
        flex_attention,
    )
except ImportError:  # pragma: no cover - an older or stripped torch build
    flex_attention = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from src.models.components.masks import AttentionMask
    from src.models.components.sinks import SinkLogit

#: The kernels of ``model.attn_kernel``: SDPA (with the explicit path where it must) or flex.
KERNELS = ("sdpa", "flex")

#: Run the compiled (fused) kernel and BlockMask builder; False runs FlexAttention's eager
#: reference implementation, which computes the same numbers with the full T × S scores (tests
#: use it: no compile time).
COMPILE = True
_compiled: tuple[Callable[..., object], Callable[..., object]] | None = None


def check_kernel(kernel: object, dropout: float) -> None:
    """``model.attn_kernel`` at config time: a known kernel, a torch build that has flex, and no
    attention dropout (FlexAttention has none)."""
    if kernel not in KERNELS:
        raise ConfigError(
            f"model.attn_kernel={kernel!r} is not known; use 'sdpa' (default) or 'flex'"
        )
    if kernel == "flex" and flex_attention is None:
        raise ConfigError(
            f"model.attn_kernel=flex needs torch.nn.attention.flex_attention, which torch "
            f"{torch.__version__} lacks; use model.attn_kernel=sdpa or torch >= 2.5"
        )
    if kernel == "flex" and dropout > 0:
        raise ConfigError(
            f"model.attn_kernel=flex has no attention dropout (model.dropout={dropout}); set "
            "model.dropout=0 or use model.attn_kernel=sdpa"
        )


@dataclass
class FlexBias:
    """One self-attention pattern for ``flex_attention``, built once per batch and shared by the
    layers with the same mask. ``score_bias``: the position's additive bias [H, T, S] or
    [B, H, T, S] (ALiBi, T5), read by the ``score_mod``; ``sinks``: sink-token keys before the
    sequence's (columns 0..n-1)."""

    block_mask: BlockMask
    score_bias: Tensor | None = None
    sinks: int = 0


def flex_bias(
    mask: AttentionMask | None,
    *,
    q_start: int,
    k_start: int,
    q_len: int,
    k_len: int,
    key_padding: Tensor | None = None,
    prefix_length: Tensor | None = None,
    score_bias: Tensor | None = None,
    document_ids: Tensor | None = None,
    sinks: int = 0,
    device: torch.device | None = None,
) -> FlexBias:
    """The BlockMask of ``q_len`` queries at absolute positions ``q_start``… over ``sinks`` sink
    keys then ``k_len`` keys at ``k_start``…: the mask's rule, AND the padding ([B, S], 1 = real),
    AND the same document (``document_ids`` [B, T], keys = queries), OR a sink column."""
    n = sinks
    prefix = prefix_length
    if mask is not None and mask.needs_prefix_length and prefix is None:
        mask.allowed(torch.arange(1), torch.arange(1))  # raises the mask's own one-line error
    pad = None if key_padding is None else key_padding.bool()  # [B, S]
    docs = document_ids  # [B, T]

    def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        kk = (kv_idx - n).clamp(min=0)  # the sequence's key index
        ok = kv_idx >= n  # every sequence key, before the rules
        if mask is not None:
            rule = mask.visible(
                q_idx + q_start, kk + k_start, None if prefix is None else prefix[b]
            )
            ok = ok if rule is None else ok & rule
        if pad is not None:
            ok = ok & pad[b, kk]
        if docs is not None:
            ok = ok & (docs[b, q_idx] == docs[b, kk])
        return ok | (kv_idx < n) if n else ok

    per_row = prefix is not None or pad is not None or docs is not None
    batch = next(t.shape[0] for t in (prefix, pad, docs) if t is not None) if per_row else None
    make = _compiled_fns()[1] if _compile() else create_block_mask
    block_mask = make(mask_mod, batch, None, q_len, n + k_len, device=device)
    return FlexBias(block_mask=block_mask, score_bias=score_bias, sinks=n)


def _score_mod(
    bias: FlexBias, softcap: float | None
) -> Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor] | None:
    """cap · tanh(s / cap) (Gemma 2), then the position's additive bias: the explicit path's
    order (the scores are already scaled)."""
    add, n = bias.score_bias, bias.sinks
    if add is None and softcap is None:
        return None

    def score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        if softcap is not None:
            score = softcap * torch.tanh(score / softcap)
        if add is not None:
            kk = (kv_idx - n).clamp(min=0)
            a = (
                add[h, q_idx, kk]
                if add.dim() == 3
                else add[b if add.shape[0] > 1 else 0, h, q_idx, kk]
            )
            score = score + (torch.where(kv_idx < n, torch.zeros_like(a), a) if n else a)
        return score

    return score_mod


def _compile() -> bool:
    """Whether to call the compiled functions: ``COMPILE``, and not already inside a compiled
    model (whose compile fuses the plain ones)."""
    return COMPILE and not torch.compiler.is_compiling()


def _compiled_fns() -> tuple[Callable[..., object], Callable[..., object]]:
    """(compiled flex_attention, compiled create_block_mask), compiled on first use. The eager
    create_block_mask evaluates mask_mod on the whole [B, H, T, S] grid (a 704 MiB peak at
    T = 8k, W = 256 on CPU; 0.06 MiB compiled: docs/attention.md)."""
    global _compiled
    if _compiled is None:
        _compiled = (torch.compile(flex_attention), torch.compile(create_block_mask))
    return _compiled


def _kernel(lse_on_cpu: bool) -> Callable[..., object]:
    """The compiled kernel, or the plain function (``COMPILE`` off; inside a compiled model; or
    a log-sum-exp on CPU, which torch 2.13's compiled CPU kernel does not return)."""
    return _compiled_fns()[0] if _compile() and not lse_on_cpu else flex_attention


def flex_attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    bias: FlexBias,
    scale: float | None = None,
    softcap: float | None = None,
    sink: SinkLogit | None = None,
) -> Tensor:
    """q: [B, H, T, D], k/v: [B, K, S, D|Dv] (K divides H) -> [B, H, T, Dv]: the same numbers as
    ``explicit_attention`` / SDPA on the same pattern (no dropout)."""
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    if needs_grad and q.device.type == "cpu":
        raise ValueError(
            f"model.attn_kernel=flex cannot train on CPU: torch {torch.__version__}'s "
            "FlexAttention has no CPU backward; use model.attn_kernel=sdpa on CPU (flex runs "
            "CPU inference, and trains on a GPU)"
        )
    H = q.shape[1]
    aux = AuxRequest(lse=True) if sink is not None else None
    with warnings.catch_warnings():  # the eager kernel's advice to compile: COMPILE decides
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        result = _kernel(sink is not None and q.device.type == "cpu")(
            q,
            k,
            v,
            score_mod=_score_mod(bias, softcap),
            block_mask=bias.block_mask,
            scale=scale,
            enable_gqa=k.shape[1] != H,
            return_aux=aux,
        )
    if sink is None:
        return result  # type: ignore[return-value]
    out, extra = result  # type: ignore[misc]
    # the sink's share: out · sigmoid(L − b_h), L [B, H, T] the row's log-sum-exp
    keep = torch.sigmoid(extra.lse.float() - sink.logit.float().view(1, H, 1))  # [B, H, T]
    return out * keep.unsqueeze(-1).to(out.dtype)  # [B, H, T, Dv]
