"""T5's relative position bias (``model/position=t5_bias``; Raffel et al. 2020, §2.1,
arXiv:1910.10683).

Each head adds a learned scalar to the score of query i and key j, looked up by the *bucket* of
the relative position j - i: half of the buckets hold the exact distances 0 … n/2 - 1, the other
half logarithmically wider ranges up to ``max_distance`` (every farther distance shares the last
bucket). In an encoder (bidirectional) the buckets are split again by direction, so j > i and
j < i never share one; in a decoder (causal) keys after the query are masked anyway, and all
buckets go to the distances behind it. One table [num_buckets, H] per stack, shared by all its
layers (T5 stores it in the first layer's self-attention; cross-attention has none)::

    bidirectional, 32 buckets, max 128:   j - i = 0 1 2 … 7 | 8 … 127 (log) | ≥ 128  → buckets 16 + (0 … 15)
                                          j - i < 0 likewise in buckets 0 … 15
    causal, 32 buckets, max 128:          i - j = 0 … 15 | 16 … 127 (log) | ≥ 128   → buckets 0 … 31

The bucketing is transformers' ``T5Attention._relative_position_bucket`` (Mesh TensorFlow's
``_relative_position_bucket``), tested against it.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from src.errors import ConfigError
from src.models.components.positions import POSITIONS, Position


def relative_buckets(
    relative: Tensor, bidirectional: bool, num_buckets: int, max_distance: int
) -> Tensor:
    """relative = key position - query position (any shape, integer) -> bucket ids in [0,
    num_buckets)."""
    buckets = torch.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        # keys after the query: the upper half
        buckets = buckets + (relative > 0).long() * num_buckets
        distance = relative.abs()
    else:
        # keys at or before the query; later ones are masked
        distance = -torch.clamp(relative, max=0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    # log-spaced buckets from max_exact up to max_distance; the float log of distance 0 is never
    # used
    large = (
        max_exact
        + (
            torch.log(distance.float().clamp(min=1) / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).long()
    )
    large = torch.clamp(large, max=num_buckets - 1)
    return buckets + torch.where(is_small, distance, large)


@POSITIONS.register("t5_bias")
class T5RelativeBias(Position):
    """A learned bias per head and relative-position bucket, added to the attention scores."""

    in_attention = "T5 relative bias on scores<br/>(bucketed, one table per stack)"

    def __init__(
        self, n_head: int, causal: bool = False, num_buckets: int = 32, max_distance: int = 128
    ) -> None:
        super().__init__()
        self.causal, self.num_buckets, self.max_distance = causal, num_buckets, max_distance
        self.table = nn.Embedding(num_buckets, n_head)  # [buckets, H]

    @classmethod
    def check_args(cls, *, num_buckets: int = 32, max_distance: int = 128, **_: object) -> None:
        if isinstance(num_buckets, bool) or not isinstance(num_buckets, int) or num_buckets < 4:
            raise ConfigError(
                f"model.position.num_buckets={num_buckets!r} must be an integer >= 4 (T5 uses 32): "
                "half the buckets hold exact distances and half log-spaced ones, split again by "
                "direction in an encoder"
            )
        if (
            isinstance(max_distance, bool)
            or not isinstance(max_distance, int)
            or max_distance <= num_buckets // 2
        ):
            raise ConfigError(
                f"model.position.max_distance={max_distance!r} must be an integer above "
                f"num_buckets / 2 = {num_buckets // 2} (the exact buckets' range; T5 uses 128)"
            )

    def score_bias(self, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        # [T, S] (or [B, T, S]): memory - query
        relative = k_pos[..., None, :] - q_pos[..., :, None]
        buckets = relative_buckets(relative, not self.causal, self.num_buckets, self.max_distance)
        return self.table(buckets).movedim(-1, -3)  # [.., T, S, H] -> [.., H, T, S]
