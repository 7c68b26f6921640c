"""Sliding windows over a long token sequence, their NLL, and the figures made from it.

A window is a span ``tokens[begin:end]``: the model reads ``tokens[begin:end-1]`` and predicts
each next token; the last ``n_target`` predictions (targets ``tokens[end-n_target:end]``) are
scored. ``windows_nll`` is the one loop that scores them (the perplexity benchmark through
``Scorer.window_nll``, and length extrapolation).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor
from torch.nn import functional as F

from src.evaluation.batching import length_batches, pad_right

if TYPE_CHECKING:
    from src.models import TransformerModel


@dataclass
class WindowWork:
    """One window: tokens[begin:end] is its span, the last ``n_target`` tokens are scored."""

    begin: int
    end: int
    n_target: int


def sliding_windows(n_tokens: int, context_length: int, stride: int) -> list[WindowWork]:
    """Windows of the transformers perplexity guide (``docs/transformers/perplexity``).

    Window k reads ``tokens[k·stride : k·stride + context_length]`` and scores only the
    targets after the previous window's end, so every token is scored once, with as much
    context as the stride allows. The very first token has no context and is never scored.
    """
    if context_length < 2:
        raise ValueError(f"context_length={context_length} must be >= 2")
    if not 0 < stride <= context_length:
        raise ValueError(f"stride={stride} must be in [1, context_length={context_length}]")
    windows: list[WindowWork] = []
    prev_end = 0
    for begin in range(0, n_tokens, stride):
        end = min(begin + context_length, n_tokens)
        trg_len = end - prev_end  # tokens not scored by the previous window
        n_target = min(trg_len, end - begin - 1)  # the window's first token has no prediction
        if n_target > 0:
            windows.append(WindowWork(begin, end, n_target))
        prev_end = end
        if end == n_tokens:
            break
    return windows


def extrapolation_windows(n_tokens: int, context: int, stride: int) -> list[WindowWork]:
    """Windows that read ``context`` tokens every ``stride`` (Press et al. 2022): the first scores
    all its ``context`` predictions, each later one the last ``stride`` (those the previous window
    did not). Only whole windows: the span ends where the last one does."""
    if n_tokens - 1 < context:
        return []
    return [
        WindowWork(s, s + context + 1, context if s == 0 else stride)
        for s in range(0, n_tokens - 1 - context + 1, stride)
    ]


def windows_nll(
    model: TransformerModel,
    tokens: Tensor,
    windows: Sequence[WindowWork],
    *,
    batch_size: int,
    max_batch_tokens: int,
    pad_id: int = 0,
    advance: Callable[[int], None] = lambda n: None,
) -> tuple[float, int, int]:
    """(Σ NLL in nats, tokens scored, tokens read) of a left-to-right model over ``windows`` of
    ``tokens`` [N].

    Windows of similar length share a batch (right padding never reaches a causal model's earlier
    positions); the head runs only where a token is scored. A prefix-LM decoder reads each window
    with an empty prefix, i.e. causally.
    """
    total, count, read = 0.0, 0, 0
    lengths = [w.end - w.begin - 1 for w in windows]
    for batch in length_batches(lengths, batch_size, max_batch_tokens):
        ids, _ = pad_right(
            [tokens[windows[i].begin : windows[i].end - 1].tolist() for i in batch], pad_id
        )
        ids = ids.to(model.device)  # [B, T]
        prefix = (
            torch.zeros(len(batch), dtype=torch.long, device=ids.device)
            if model.needs_prefix_length
            else None
        )
        hidden = model.hidden_states(ids, prefix_length=prefix)  # [B, T, C]
        # [n, C] each
        rows = [
            hidden[row, lengths[i] - windows[i].n_target : lengths[i]]
            for row, i in enumerate(batch)
        ]
        targets = torch.cat(
            [tokens[windows[i].end - windows[i].n_target : windows[i].end] for i in batch]
        ).to(ids.device)
        logits = model.logits(torch.cat(rows))  # [Σn, V]
        total += float(F.cross_entropy(logits.float(), targets, reduction="sum").double())
        count += int(targets.numel())
        read += sum(lengths[i] for i in batch)
        advance(len(batch))
    return total, count, read


def perplexity_metrics(
    nll: float, n_tokens: int, n_bytes: int | None = None, n_words: int | None = None
) -> dict[str, float]:
    """Σ NLL (nats) over ``n_tokens`` -> loss, token ppl, bits per byte, word ppl."""
    out = {"loss": nll / n_tokens, "ppl": math.exp(nll / n_tokens)}
    if n_bytes:
        out["bits_per_byte"] = nll / n_bytes / math.log(2)
    if n_words:
        out["word_ppl"] = math.exp(nll / n_words)
    return out
