"""The probe batch: random token sequences repeated twice (Olsson et al. 2022, "In-context
Learning and Induction Heads", §2: "repeated random tokens"), and how each family reads it.

::

    x      = [r_0 … r_{L-1} r_0 … r_{L-1}]                  [B, T], T = 2L; r: L distinct tokens drawn
                                                            uniformly from the vocabulary
    stream = x                     (decoder-only, encoder-only: the stack reads the sequence itself)
           = [start, x_0 … x_{T-2}] (a prompt-is-source model: the decoder is teacher-forced on x, the
                                     encoder reads x)

A token of the second copy can only be predicted by finding its earlier occurrence and copying
the token after it: what an induction head does. The tokens of a copy are distinct (L <= the
vocabulary), so each has exactly one earlier occurrence even in a small synthetic vocabulary
(with repeats the probe is ambiguous: a model trained on 10 symbols scored 0.12 on copies with
repeats and 1.00 on copies without). The batch is drawn from its own
``torch.Generator`` seeded by the caller, so drawing it never touches the global RNG (training
with and without probes takes the same steps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from src.errors import ConfigError
from src.models.families import TransformerModel


@dataclass
class ProbeBatch:
    """The repeated sequences and what the model's forward takes for them."""

    tokens: Tensor  # [B, T] x: two copies of L random tokens
    period: int  # L: the second copy starts at x index L
    # [B, T] the token ids the probed self-attention reads (rows and columns of its maps)
    stream: Tensor
    offset: int  # stream index of x_0 (1 when the stream starts with the decoder's start token)
    forward: dict[str, Any]  # model(**forward, labels=tokens) -> the loss on x (teacher-forced)
    probs: dict[str, Any]  # model.attention_probs(**probs)
    # [B] the bidirectional prefix of a prefix-LM (the first copy), else None
    prefix_length: Tensor | None

    @property
    def length(self) -> int:
        return int(self.tokens.shape[1])


def check_length(length: int, model: TransformerModel, key: str = "length") -> None:
    """``length`` must hold two copies of at least two tokens and fit a learned position table."""
    if isinstance(length, bool) or not isinstance(length, int) or length < 4 or length % 2:
        raise ConfigError(
            f"{key}={length!r} must be an even integer >= 4 (two copies of length/2 distinct "
            f"random tokens); e.g. {key}=64"
        )
    if length // 2 > model.config.vocab_size:
        raise ConfigError(
            f"{key}={length}: a copy of {length // 2} distinct tokens does not fit the vocabulary "
            f"of {model.config.vocab_size}; set {key}<={2 * model.config.vocab_size} or null"
        )
    rows = model.max_positions
    if rows is not None and length > rows:
        raise ConfigError(
            f"{key}={length} is longer than the model's position table ({rows} rows); set "
            f"{key}<={rows - rows % 2} or null (the longest that fits, at most 64)"
        )


#: the longest probe sequence ``default_length`` gives (callbacks.probes.length=null)
DEFAULT_CAP = 64


def default_length(model: TransformerModel, cap: int = DEFAULT_CAP) -> int:
    """The longest even length up to ``cap`` that the model's positions accept, with copies of
    distinct tokens (length/2 <= vocabulary)."""
    rows = model.max_positions
    n = min(cap, 2 * model.config.vocab_size, *([rows] if rows is not None else []))
    return n - n % 2


def probe_batch(
    model: TransformerModel,
    batch_size: int,
    length: int,
    seed: int,
    device: torch.device | None = None,
) -> ProbeBatch:
    """``batch_size`` sequences of ``length`` tokens (two copies of length/2), drawn from a
    generator of its own seeded with ``seed`` (never the global RNG), on ``device`` (default: the
    model's)."""
    check_length(length, model)
    device = device or model.device
    g = torch.Generator(device="cpu").manual_seed(int(seed))
    L = length // 2
    V = model.config.vocab_size
    # [B, V] -> [B, L] distinct ids per row
    half = torch.rand(batch_size, V, generator=g).argsort(dim=-1)[:, :L]
    x = torch.cat([half, half], dim=1).to(device)  # [B, L] -> [B, 2L]
    B = x.shape[0]
    # the encoder reads x; the decoder is teacher-forced on it after its start token
    if model.prompt_is_source:
        stream = torch.cat([model.start_tokens(B, device), x[:, :-1]], dim=1)  # [B, T]
        return ProbeBatch(
            x, L, stream, 1, {"input_ids": x}, {"input_ids": x, "decoder_input_ids": stream}, None
        )
    prefix = (
        torch.full((B,), L, dtype=torch.long, device=device) if model.needs_prefix_length else None
    )
    extra = {"prefix_length": prefix} if prefix is not None else {}
    return ProbeBatch(x, L, x, 0, {"input_ids": x, **extra}, {"input_ids": x, **extra}, prefix)
