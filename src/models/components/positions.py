"""Position information, behind one interface with two hooks.

Every position variant implements both hooks; blocks never ask which kind they hold:

* ``add_to_embeddings(x, positions)`` — absolute schemes add a vector per position to the
  token embeddings (learned table, sinusoidal); relative schemes return ``x`` unchanged.
* ``rotate(q, k, q_pos, k_pos)`` / ``score_bias(q_pos, k_pos)`` — relative schemes act
  inside attention: RoPE rotates queries and keys, ALiBi adds a bias to the scores.

Without any of them (``none``, NoPE) attention is permutation-equivariant over the
tokens of a bidirectional encoder; only the causal mask then carries order.

One position module serves a whole stack (every layer calls the same instance, so a learned
relative-bias table is shared across layers). A constructor asks for the context it needs by
name: ``d_model``, ``n_head``, ``head_dim``, ``max_seq_len``, and ``causal`` (whether the stack's
attention is causal, e.g. for bucketing relative distances one-sided in a decoder).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from src.errors import ConfigError
from src.models.components.rope_scaling import ROPE_SCALINGS, RopeScaling, base_inv_freq
from src.registry import Registry, or_list

POSITIONS: Registry[Position] = Registry(
    "position", conf="model/position", package="src.models.components"
)


class PositionLimitError(ValueError):
    """A sequence is longer than a learned position table. Kept apart from
    ``src.errors.ConfigError`` because ``src.evaluation.extrapolation`` catches exactly this to
    record the length "not applicable"."""


class Position(nn.Module):
    """Base class: the identity for both hooks."""

    #: Rows of an absolute table, or ``None`` when any length is accepted.
    max_positions: int | None = None
    #: For diagrams: what the scheme does inside attention (None: nothing there).
    in_attention: str | None = None
    #: The longest sequence whose KV cache stays exact (None: any). Dynamic NTK RoPE rotates every
    #: position by the frequencies of the current length once it exceeds the training length, so
    #: keys and values cached at a shorter length are stale past it.
    cache_limit: int | None = None

    @classmethod
    def in_embeddings(cls, node: Mapping[str, Any], d_model: int, max_seq_len: int) -> str | None:
        """For diagrams: what the scheme adds to the token embeddings (None: nothing)."""
        return None

    def check_length(self, length: int) -> None:
        if self.max_positions is not None and length > self.max_positions:
            raise PositionLimitError(
                f"sequence length {length} exceeds the learned position table "
                f"({self.max_positions} rows, model.max_seq_len={self.max_positions}); shorten the "
                "input (data.block_size / context_length) or use a relative scheme such as "
                "model/position=rope"
            )

    def check_cache(self, length: int) -> None:
        """A cached forward reaching ``length`` positions must stay within ``cache_limit``."""
        if self.cache_limit is not None and length > self.cache_limit:
            raise ValueError(
                f"a KV cache of {length} positions: past model.position's original length "
                f"{self.cache_limit} its rotation follows the current length (dynamic RoPE), so "
                "cached keys and values would be stale; decode without the cache past it "
                "(generate() does so itself: it recomputes the whole prefix each step)"
            )

    def add_to_embeddings(self, x: Tensor, positions: Tensor) -> Tensor:
        """x: [B, T, C], positions: [T] or [B, T] (absolute indices) -> [B, T, C]."""
        return x

    def rotate(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> tuple[Tensor, Tensor]:
        """q: [B, H, T, D], k: [B, K, S, D] -> same shapes."""
        return q, k

    def score_bias(self, q_pos: Tensor, k_pos: Tensor) -> Tensor | None:
        """Additive score bias [H, T, S] (or None)."""
        return None


@POSITIONS.register("none")
class NoPosition(Position):
    """NoPE: no position information at all (Kazemnejad et al. 2023)."""

    in_attention = "no positions (NoPE)"


@POSITIONS.register("learned")
class LearnedPosition(Position):
    """An absolute position table, as GPT-2's ``wpe`` and BERT's position embeddings.

    The table hard-limits context to its rows: longer inputs raise ``PositionLimitError``
    instead of wrapping around or indexing out of range.
    """

    def __init__(self, d_model: int, max_seq_len: int) -> None:
        super().__init__()
        self.max_positions = max_seq_len
        self.table = nn.Embedding(max_seq_len, d_model)

    @classmethod
    def in_embeddings(cls, node: Mapping[str, Any], d_model: int, max_seq_len: int) -> str | None:
        return f"learned positions<br/>{max_seq_len} × {d_model}"

    def add_to_embeddings(self, x: Tensor, positions: Tensor) -> Tensor:
        # Stack checks offset + T on the host before calling; this tensor check is for other
        # callers, and only on CPU (elsewhere int() would be a host-device sync every step).
        if (
            positions.device.type == "cpu"
            and positions.numel()
            and not torch.compiler.is_compiling()
        ):
            self.check_length(int(positions.max()) + 1)
        return x + self.table(positions)  # [T, C] or [B, T, C] broadcasts over B


def sinusoid_table(n_pos: int, d_model: int, layout: str, base: float = 10000.0) -> Tensor:
    """Vaswani et al. 2017, §3.5: PE(pos, 2i) = sin(pos / base^(2i/C)), PE(pos, 2i+1) = cos(...).

    ``interleaved`` puts sin/cos in even/odd channels (the paper's formula);
    ``concat`` puts all sines first, then all cosines ([sin | cos], tensor2tensor and Marian).
    """
    half = d_model // 2
    inv_freq = base ** (-torch.arange(half, dtype=torch.float64) * 2.0 / d_model)  # [C/2]
    angles = torch.arange(n_pos, dtype=torch.float64)[:, None] * inv_freq[None, :]  # [P, C/2]
    table = torch.zeros(n_pos, d_model, dtype=torch.float64)
    if layout == "interleaved":
        table[:, 0 : 2 * half : 2] = angles.sin()
        table[:, 1 : 2 * half : 2] = angles.cos()
    elif layout == "concat":
        table[:, :half] = angles.sin()
        table[:, half : 2 * half] = angles.cos()
    else:
        raise ValueError(f"position.layout='{layout}' is not known; use 'interleaved' or 'concat'")
    return table.float()


@POSITIONS.register("sinusoidal")
class SinusoidalPosition(Position):
    """Fixed sinusoids added to the embeddings (Vaswani et al. 2017); any length works."""

    def __init__(self, d_model: int, layout: str = "interleaved", base: float = 10000.0) -> None:
        super().__init__()
        if layout not in ("interleaved", "concat"):
            raise ValueError(
                f"position.layout='{layout}' is not known; use 'interleaved' or 'concat'"
            )
        self.d_model, self.layout, self.base = d_model, layout, base
        self._table: Tensor = torch.empty(0)  # grown on demand; not part of the state dict

    @classmethod
    def in_embeddings(cls, node: Mapping[str, Any], d_model: int, max_seq_len: int) -> str | None:
        return f"sinusoidal positions<br/>{node.get('layout', 'interleaved')}, fixed"

    def _get(self, n: int, device: torch.device) -> Tensor:
        if self._table.shape[0] < n or self._table.device != device:
            size = max(n, 2 * self._table.shape[0], 1024)
            self._table = sinusoid_table(size, self.d_model, self.layout, self.base).to(device)
        return self._table

    def add_to_embeddings(self, x: Tensor, positions: Tensor) -> Tensor:
        table = self._get(int(positions.max()) + 1 if positions.numel() else 1, x.device)
        return x + table[positions].to(x.dtype)


def rotate_half(x: Tensor) -> Tensor:
    """[x1 | x2] -> [-x2 | x1] over the last dim (the GPT-NeoX / Llama layout)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotated_width(head_dim: int, rotary_fraction: float) -> int:
    """Channels of a head that RoPE rotates: ``rotary_fraction`` of them, rounded down to whole
    pairs."""
    rot = int(head_dim * rotary_fraction)
    return rot - rot % 2


@POSITIONS.register("rope")
class RotaryPosition(Position):
    """Rotary position embedding (Su et al. 2021, RoFormer, arXiv:2104.09864).

    Rotates each (q, k) channel pair by an angle proportional to the position, so the
    score q_m·k_n depends only on m - n. Channels are paired as [first half | second half]
    (GPT-NeoX / Llama layout). ``rotary_fraction`` < 1 rotates only the first part of
    each head (partial rotary, GPT-NeoX / Phi). ``scaling`` rescales the frequencies for
    contexts beyond the training length (``src.models.components.rope_scaling``: linear,
    dynamic, yarn, llama3), in training or only at evaluation.
    """

    in_attention = "RoPE rotates Q, K"

    def __init__(
        self,
        head_dim: int,
        max_seq_len: int | None = None,
        theta: float = 10000.0,
        rotary_fraction: float = 1.0,
        scaling: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        rot = rotated_width(head_dim, rotary_fraction)
        self.head_dim, self.rot_dim, self.theta = head_dim, rot, theta
        self.scaling = build_scaling(scaling, max_seq_len)
        # dynamic NTK
        self.follows_length = self.scaling is not None and self.scaling.follows_length
        # below the original length the frequencies are fixed, so the cache is exact there
        if self.follows_length:
            self.cache_limit = self.scaling.original  # type: ignore[union-attr]
        # YaRN's temperature
        self.attention_factor = 1.0 if self.scaling is None else self.scaling.attention_factor
        # [R/2]
        inv_freq = (
            base_inv_freq(theta, rot) if self.scaling is None else self.scaling.inv_freq(theta, rot)
        )
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        # (q positions, k positions, dtype, cos/sin of q, cos/sin of k) of the last call: every
        # layer of a forward passes the same position tensors, so cos/sin are computed once per
        # forward, not 2·L times
        self._memo: (
            tuple[Tensor, Tensor, torch.dtype, tuple[Tensor, Tensor], tuple[Tensor, Tensor]] | None
        ) = None

    @classmethod
    def check_args(
        cls,
        *,
        head_dim: int,
        rotary_fraction: float = 1.0,
        d_model: int | None = None,
        n_head: int | None = None,
        scaling: Mapping[str, Any] | None = None,
        max_seq_len: int | None = None,
        **_: object,
    ) -> int:
        """Channels are rotated in pairs: the head dimension must be even; ``scaling`` must build.
        Returns the rotated width."""
        rot = rotated_width(head_dim, rotary_fraction)
        if head_dim % 2:
            split = (
                f"d_model/n_head = {d_model}/{n_head} = {head_dim}"
                if d_model and n_head
                else f"head_dim = {head_dim}"
            )
            raise ConfigError(
                f"model/position=rope needs an even head dimension, but {split}; "
                f"change model.n_head or model.d_model"
            )
        if rot <= 0:
            raise ConfigError(
                f"model.position.rotary_fraction={rotary_fraction} rotates no channel pair of a "
                f"{head_dim}-dim head; use a fraction in (0, 1] with at least 2 channels"
            )
        if rot == 2 and scaling is not None and scaling.get("name") == "dynamic":
            raise ConfigError(
                "model.position.scaling=dynamic needs at least 4 rotated channels (its exponent is "
                "R/(R-2))"
            )
        build_scaling(scaling, max_seq_len)
        return rot

    def _freqs(self, k_pos: Tensor) -> Tensor:
        if not self.follows_length:
            return self.inv_freq
        length = k_pos.max() + 1  # the current sequence length (a tensor: no host-device sync)
        return self.scaling.inv_freq(self.theta, self.rot_dim, length).to(self.inv_freq.device)  # type: ignore[union-attr]

    def _cos_sin(self, pos: Tensor, inv_freq: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        freqs = pos.float()[..., None] * inv_freq  # [..., T, R/2]
        emb = torch.cat((freqs, freqs), dim=-1)  # [..., T, R]
        cos, sin = emb.cos(), emb.sin()
        if self.attention_factor != 1.0:
            cos, sin = cos * self.attention_factor, sin * self.attention_factor
        cos, sin = cos.to(dtype), sin.to(dtype)
        if pos.dim() == 2:  # per-example positions [B, T] -> [B, 1, T, R]
            cos, sin = cos[:, None], sin[:, None]
        return cos, sin

    def _rotate_one(
        self, x: Tensor, cos: Tensor, sin: Tensor
    ) -> Tensor:  # not ``_apply``: nn.Module's hook for .to()
        if self.rot_dim == self.head_dim:
            return x * cos + rotate_half(x) * sin
        x_rot, x_pass = x[..., : self.rot_dim], x[..., self.rot_dim :]
        return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x_pass), dim=-1)

    def rotate(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> tuple[Tensor, Tensor]:
        memo = self._memo
        if (
            memo is not None
            and memo[0] is q_pos
            and memo[1] is k_pos
            and memo[2] == q.dtype
            and memo[3][0].device == self.inv_freq.device
        ):
            cq, ck = memo[3], memo[4]
        else:
            # dynamic: the frequencies of the current length, for q and k alike
            inv_freq = self._freqs(k_pos)
            cq = self._cos_sin(q_pos, inv_freq, q.dtype)
            ck = cq if k_pos is q_pos else self._cos_sin(k_pos, inv_freq, q.dtype)
            if not torch.compiler.is_compiling():  # compiled graphs dedupe it themselves
                self._memo = (q_pos, k_pos, q.dtype, cq, ck)
        return self._rotate_one(q, *cq), self._rotate_one(k, *ck)


def build_scaling(scaling: Mapping[str, Any] | None, max_seq_len: int | None) -> RopeScaling | None:
    """The ``model.position.scaling`` node as a ``RopeScaling`` (None: none); errors name the
    key."""
    if scaling is None:
        return None
    if not isinstance(scaling, Mapping):
        raise ConfigError(
            f"model.position.scaling={scaling!r} must be a mapping such as {{name: yarn, factor: "
            f"4}}"
        )
    node = dict(scaling)
    name = node.get("name")
    if name not in ROPE_SCALINGS:
        raise ConfigError(
            f"model.position.scaling.name={name!r} is not a RoPE scaling type; use "
            f"{or_list(ROPE_SCALINGS.in_order(), quote=True)} (transformers' rope_type)"
        )
    if "factor" not in node:
        raise ConfigError(
            f"model.position.scaling ({name}) needs a factor: the ratio of the longest context to "
            "the training length (e.g. model.position.scaling.factor=4)"
        )
    try:
        # ROPE_SCALINGS.build, before it constructs
        cls, kwargs = ROPE_SCALINGS.resolve(node, max_seq_len=max_seq_len)
    except ConfigError as e:  # an unknown key: say which node
        raise ConfigError(f"model.position.scaling: {e}") from None
    try:
        return cls(**kwargs)
    except TypeError as e:  # e.g. max_seq_len unknown to a caller building the position alone
        raise ConfigError(
            f"model.position.scaling ({name}): {e}; give original_max_seq_len"
        ) from None


def alibi_slopes(n_head: int) -> Tensor:
    """Press et al. 2022 (ALiBi), §3: geometric slopes 2^(-8/n), 2^(-16/n) …; for n not a
    power of two, interleave the slopes of the next power of two (as the reference code)."""

    def pow2(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n_head).is_integer():
        return torch.tensor(pow2(n_head))
    closest = 2 ** math.floor(math.log2(n_head))
    return torch.tensor(pow2(closest) + pow2(2 * closest)[0::2][: n_head - closest])


@POSITIONS.register("alibi")
class ALiBiPosition(Position):
    """Attention with Linear Biases (Press et al. 2022, arXiv:2108.12409): score += -m_h·|i - j|."""

    in_attention = "ALiBi bias on scores"

    def __init__(self, n_head: int) -> None:
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(n_head), persistent=False)  # [H]

    def score_bias(self, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        dist = (q_pos[..., :, None] - k_pos[..., None, :]).abs().float()  # [T, S] (or [B, T, S])
        bias = -self.slopes[:, None, None] * dist.unsqueeze(-3)  # [H, T, S] (or [B, H, T, S])
        return bias
