"""Probes read from attention probabilities [B, H, T, S] (``model.attention_probs``, the explicit
path).

Legend: ``B`` batch, ``H`` heads, ``T`` queries, ``S`` keys, ``L`` the period of the repeated batch.

* **induction score** of a head (Olsson et al. 2022, "In-context Learning and Induction Heads",
  §2 and Appendix "prefix matching"): on a sequence repeated twice, the mean attention from each
  query of the second copy to the key right after its earlier occurrence, key = query − L + 1;
* **previous-token score** (the other half of the induction circuit; Olsson et al. 2022, Elhage
  et al. 2021): the mean attention from each query to the key before it, key = query − 1;
* **attention entropy** (Zhai et al. 2023, "Stabilizing Transformer Training by Preventing
  Attention Entropy Collapse"): −Σ p log p of each query's row over the keys it may see,
  divided by log(number of those keys), so 1 = uniform and 0 = one key; queries that see a
  single key are left out (their entropy is 0 whatever the model);
* **sink mass** (Xiao et al. 2023, "Efficient Streaming Language Models with Attention
  Sinks"): the attention each query (but the first) puts on the first key.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from src.models.components.masks import AttentionMask


def induction_scores(probs: Tensor, period: int, offset: int = 0) -> Tensor:
    """[B, H, T, T] -> [H]: mean attention from each second-copy query p (stream index; the stream
    holds x from ``offset`` on) to key p − L + 1, the token after the earlier occurrence of p's
    token."""
    T = probs.shape[-1]
    q = torch.arange(period + offset, T, device=probs.device)  # queries of the second copy
    if not len(q):
        raise ValueError(f"a sequence of {T} tokens holds no second copy of period {period}")
    return probs[:, :, q, q - period + 1].float().mean(dim=(0, 2))  # [B, H, n] -> [H]


def previous_token_scores(probs: Tensor) -> Tensor:
    """[B, H, T, T] -> [H]: mean attention from each query p >= 1 to key p − 1."""
    T = probs.shape[-1]
    q = torch.arange(1, T, device=probs.device)
    return probs[:, :, q, q - 1].float().mean(dim=(0, 2))  # [B, H, T-1] -> [H]


def visible_keys(
    mask: AttentionMask | None, T: int, S: int, prefix_length: Tensor | None, device: torch.device
) -> Tensor:
    """[1|B, T]: how many keys each query may attend to under ``mask`` (None: all S)."""
    allowed = None
    if mask is not None:
        # [1|B, T, S]
        allowed = mask.allowed(
            torch.arange(T, device=device), torch.arange(S, device=device), prefix_length
        )
    if allowed is None:
        return torch.full((1, T), S, device=device)
    return allowed.sum(-1)  # [1|B, T, S] -> [1|B, T]


def attention_entropy(probs: Tensor, n_visible: Tensor) -> Tensor:
    """[B, H, T, S], [1|B, T] -> [H]: mean normalised entropy over the batch and the queries that
    see >= 2 keys."""
    p = probs.float()
    ent = -(p * p.clamp_min(1e-30).log()).sum(-1)  # [B, H, T]; 0·log 0 = 0
    n = n_visible.float()[:, None, :].expand(p.shape[0], 1, -1)  # [1|B, T] -> [B, 1, T]
    keep = n >= 2
    if not keep.any():
        return torch.full((p.shape[1],), math.nan)
    normed = ent / n.clamp_min(2).log()  # [B, H, T]
    weights = keep.expand_as(normed).float()
    return (normed * weights).sum(dim=(0, 2)) / weights.sum(dim=(0, 2))  # [H]


def sink_mass(probs: Tensor, sink_logit: bool = False) -> Tensor:
    """[B, H, T, S] -> [H]: mean attention on the sink. Without a sink of its own (``sink_logit``
    False) the sink is the first key (Xiao et al. 2023, StreamingLLM), over queries 1..T-1 (query 0
    of a causal map has nothing else to see); with a learned sink logit (``model/sinks=learned``)
    it is the mass the softmax gave that logit, 1 - Σ_j p_ij, over every query."""
    if sink_logit:
        return (1 - probs.float().sum(-1)).mean(dim=(0, 2))  # [B, H, T] -> [H]
    if probs.shape[-2] < 2:
        return probs[:, :, :, 0].float().mean(dim=(0, 2))
    return probs[:, :, 1:, 0].float().mean(dim=(0, 2))  # [B, H, T-1] -> [H]
