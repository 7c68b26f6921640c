"""Sliding windows over a long token sequence, and the figures made from their NLL."""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class WindowWork:
    """One sliding window: tokens[begin:end] is read, the last ``n_target`` positions are scored."""

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


def perplexity_metrics(nll: float, n_tokens: int, n_bytes: int | None = None, n_words: int | None = None) -> dict[str, float]:
    """Σ NLL (nats) over ``n_tokens`` -> loss, token ppl, bits per byte, word ppl."""
    out = {"loss": nll / n_tokens, "ppl": math.exp(nll / n_tokens)}
    if n_bytes:
        out["bits_per_byte"] = nll / n_bytes / math.log(2)
    if n_words:
        out["word_ppl"] = math.exp(nll / n_words)
    return out
