"""The sequence-mixer interface and its registry (``model/mixer``, ``model.layer_mixers``).

A mixer is the token-mixing sublayer of a block: the block's norm, residual and FFN stay as
they are, and the attention sublayer is replaced by the mixer (Zoology, Arora et al. 2023, §3;
Jamba, Lieber et al. 2024, mix both kinds in one stack)::

    x ─┬─ norm? ─ mixer(x, state) ─ (+) ─┐     mixer: attention | linear_attention | short_conv …
       └───────────────────────────────┘

``attention`` is the block's own softmax attention (masks, positions, the KV cache): it is a
registered choice whose ``attends`` is True, and the block builds ``MultiHeadAttention`` for it
exactly as without mixers. Every other mixer is a ``SequenceMixer``: causal, position-free, with
a state that summarises the sequence so far, so generation carries one state per layer
(``KVCache.states``) instead of keys and values.

Legend: ``B`` batch, ``T`` length, ``C`` model dim, ``H`` heads, ``D`` head dim, ``F`` features.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from src.errors import ConfigError
from src.registry import Registry

MIXERS: Registry[Any] = Registry("mixer", conf="model/mixer", package="src.models.mixers")

#: What a mixer's forward returns as its state: a tensor or a tuple of tensors.
State = Any


class SequenceMixer(nn.Module):
    """A causal token mixer: ``forward(x [B, T, C], state) -> (y [B, T, C], new_state)``.

    ``state`` None is the start of a sequence; the returned state is what the recurrent form
    needs to continue (always returned). With T > 1 a recurrent mixer runs its chunked parallel
    form; generation calls it with T = 1 and the previous state.
    """

    #: True only for ``attention``: the block builds its own attention path instead.
    attends: ClassVar[bool] = False
    #: For diagrams: one line on what it computes.
    display: ClassVar[str] = ""

    def forward(self, x: Tensor, state: State = None) -> tuple[Tensor, State]:
        raise NotImplementedError

    def init_state(self, batch: int, device: torch.device, dtype: torch.dtype) -> State:
        """The state of an empty prefix (forward with it equals forward with None)."""
        raise NotImplementedError

    def forward_flops(self, batch_size: int, seq_len: int) -> int:
        """Matmul FLOPs of one forward over ``batch_size × seq_len`` tokens, counted as
        ``torch.utils.flop_counter.FlopCounterMode`` counts them (src/models/components/flops.py)."""
        raise NotImplementedError

    @classmethod
    def check_args(cls, *, d_model: int, n_head: int, **params: Any) -> None:
        """``ConfigError`` one-liners naming the key and the fix."""


@MIXERS.register("attention")
class Attention(SequenceMixer):
    """Softmax attention (Vaswani et al. 2017): the block's ``MultiHeadAttention`` with
    ``model/attention``, the masks and the position scheme, as in a model without mixers. Never
    built as a module of its own."""

    attends = True
    display = "softmax attention"

    def __init__(self) -> None:  # pragma: no cover - the block builds the attention itself
        raise TypeError("the attention mixer is built by the block (MultiHeadAttention)")


def check_positive(key: str, value: object, why: str) -> None:
    """``ConfigError`` unless ``value`` is a positive integer; ``key`` as in ``model.mixer.<key>``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"model.mixer.{key}={value!r} must be a positive integer ({why})")


def check_divides(d_model: int, n_head: int, what: str) -> None:
    """``ConfigError`` unless the heads split ``d_model`` evenly (the state is per head)."""
    if d_model % n_head:
        raise ConfigError(
            f"model.n_head={n_head} does not divide model.d_model={d_model}: the {what} state is "
            f"split over the heads; choose n_head dividing {d_model}"
        )
