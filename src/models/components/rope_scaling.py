"""RoPE frequency scaling for contexts longer than the training length (``model.position.scaling``).

Each scheme rewrites RoPE's inverse frequencies θ_i = theta^(-2i/R) (R rotated channels) and may
scale cos/sin by an attention factor; the formulas are transformers' ``modeling_rope_utils``
(``rope_type``), checked against it in tests/models/test_rope_scaling.py::

    linear   θ_i / s                                    position interpolation (Chen et al. 2023, arXiv:2306.15595)
    dynamic  theta' = theta·(s·L/L₀ - (s-1))^(R/(R-2))   NTK-aware, recomputed for the current length L > L₀
                                                        (bloc97 / emozilla 2023; Peng et al. 2023 §3.2)
    yarn     per-frequency blend of θ_i and θ_i/s by a ramp over the wavelengths (β_fast, β_slow),
             cos/sin × (0.1·ln s + 1)                   "attention temperature" (Peng et al. 2023, arXiv:2309.00071, §3.4)
    llama3   θ_i / s for long wavelengths, θ_i for short ones, smoothed between (Meta, Llama 3.1, 2024)

``s`` = ``factor``, L₀ = ``original_max_seq_len`` (default ``model.max_seq_len``: the length the
model was trained at). Only ``dynamic`` depends on the current length (``follows_length``): past
L₀ every position is rotated by the frequencies of the whole sequence, which change with each new
token, so keys and values cached at a shorter length (in every layer: the later layers' K/V come
from hidden states computed with the old rotation) are stale. The KV cache is therefore exact up
to L₀ only (``Position.cache_limit``), and generation recomputes the prefix at each step past it,
which makes cached and uncached generation agree. transformers keeps the stale cached keys instead,
so its cached and uncached generation differ past L₀ (huggingface/transformers#25104).
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import Tensor

from src.errors import ConfigError
from src.registry import Registry

ROPE_SCALINGS: Registry[RopeScaling] = Registry("rope_scaling", package="src.models.components")


def base_inv_freq(theta: float, dim: int, device: torch.device | None = None) -> Tensor:
    """RoPE's θ_i = theta^(-2i/R), i < R/2 (Su et al. 2021, eq. 15): [R/2]."""
    return 1.0 / (
        theta ** (torch.arange(0, dim, 2, dtype=torch.int64, device=device).float() / dim)
    )


class RopeScaling:
    """A scaling scheme: ``inv_freq(theta, dim, length)`` -> [R/2] and ``attention_factor`` for
    cos/sin."""

    #: Whether the frequencies depend on the current length (then keys are re-rotated each step).
    follows_length: ClassVar[bool] = False
    attention_factor: float = 1.0

    def __init__(self, factor: float) -> None:
        if (
            isinstance(factor, bool)
            or not isinstance(factor, (int, float))
            or not factor >= 1.0
            or math.isinf(factor)
        ):
            raise ConfigError(
                f"model.position.scaling.factor={factor!r} must be a number >= 1 (the ratio of the "
                f"context to the length the model was trained at)"
            )
        self.factor = float(factor)

    def inv_freq(self, theta: float, dim: int, length: Tensor | None = None) -> Tensor:
        """The scaled inverse frequencies [R/2]; ``length`` (a 0-d tensor, the current sequence
        length) is read by schemes that ``follows_length``."""
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.registry_name} ×{self.factor:g}"  # type: ignore[attr-defined]


def _original(original_max_seq_len: int | None, max_seq_len: int) -> int:
    n = max_seq_len if original_max_seq_len is None else original_max_seq_len
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(
            f"model.position.scaling.original_max_seq_len={n!r} must be a positive integer (the "
            "length the model was trained at; default model.max_seq_len)"
        )
    return n


@ROPE_SCALINGS.register("linear")
class LinearScaling(RopeScaling):
    """Position interpolation: positions (equivalently frequencies) divided by ``factor``."""

    def inv_freq(self, theta: float, dim: int, length: Tensor | None = None) -> Tensor:
        return base_inv_freq(theta, dim) / self.factor


@ROPE_SCALINGS.register("dynamic")
class DynamicNTKScaling(RopeScaling):
    """NTK-aware scaling of the base, growing with the current length L once L > L₀ (unchanged
    below)."""

    follows_length = True

    def __init__(
        self, factor: float, max_seq_len: int, original_max_seq_len: int | None = None
    ) -> None:
        super().__init__(factor)
        self.original = _original(original_max_seq_len, max_seq_len)

    def inv_freq(self, theta: float, dim: int, length: Tensor | None = None) -> Tensor:
        if length is None:
            return base_inv_freq(theta, dim)
        L = torch.clamp(length.float(), min=float(self.original))  # seq_len = max(L, L₀)
        base = theta * ((self.factor * L / self.original) - (self.factor - 1)) ** (dim / (dim - 2))
        exponent = torch.arange(0, dim, 2, dtype=torch.int64, device=length.device).float() / dim
        return 1.0 / (base**exponent)


@ROPE_SCALINGS.register("yarn")
class YaRNScaling(RopeScaling):
    """YaRN: interpolate the low frequencies, keep the high ones, ramp between; scale cos/sin by
    the attention factor (``attention_factor``; default 0.1·ln(factor) + 1, or the ratio of the
    ``mscale`` / ``mscale_all_dim`` forms as DeepSeek-V2/V3 use)."""

    def __init__(
        self,
        factor: float,
        max_seq_len: int,
        original_max_seq_len: int | None = None,
        beta_fast: float = 32.0,
        beta_slow: float = 1.0,
        attention_factor: float | None = None,
        mscale: float | None = None,
        mscale_all_dim: float | None = None,
        truncate: bool = True,
    ) -> None:
        super().__init__(factor)
        self.original = _original(original_max_seq_len, max_seq_len)
        if not beta_fast >= beta_slow > 0:
            raise ConfigError(
                f"model.position.scaling: beta_fast={beta_fast} must be >= beta_slow={beta_slow} > "
                "0 (rotations per original context bounding the ramp; YaRN uses 32 and 1)"
            )
        self.beta_fast, self.beta_slow, self.truncate = float(beta_fast), float(beta_slow), truncate

        def get_mscale(scale: float, m: float = 1.0) -> float:
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

        if attention_factor is None:
            attention_factor = (
                get_mscale(self.factor, mscale) / get_mscale(self.factor, mscale_all_dim)
                if mscale and mscale_all_dim
                else get_mscale(self.factor)
            )
        self.attention_factor = float(attention_factor)

    def inv_freq(self, theta: float, dim: int, length: Tensor | None = None) -> Tensor:
        def correction_dim(
            rotations: float,
        ) -> float:  # the channel whose wavelength fits `rotations` times into L₀
            return (dim * math.log(self.original / (rotations * 2 * math.pi))) / (
                2 * math.log(theta)
            )

        low, high = correction_dim(self.beta_fast), correction_dim(self.beta_slow)
        if self.truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001  # prevent a division by zero
        # [R/2]
        ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
        extrapolation = base_inv_freq(theta, dim)
        keep = 1 - ramp  # 1: keep the frequency (high frequencies), 0: interpolate it
        return extrapolation / self.factor * (1 - keep) + extrapolation * keep


@ROPE_SCALINGS.register("llama3")
class Llama3Scaling(RopeScaling):
    """Llama 3.1: wavelengths above L₀/low_freq_factor interpolated by ``factor``, those below
    L₀/high_freq_factor kept, a smooth blend between."""

    def __init__(
        self,
        factor: float,
        max_seq_len: int,
        original_max_seq_len: int | None = None,
        low_freq_factor: float = 1.0,
        high_freq_factor: float = 4.0,
    ) -> None:
        super().__init__(factor)
        self.original = _original(original_max_seq_len, max_seq_len)
        if not high_freq_factor > low_freq_factor > 0:
            raise ConfigError(
                f"model.position.scaling: high_freq_factor={high_freq_factor} must exceed "
                f"low_freq_factor={low_freq_factor} > 0 (Llama 3.1 uses 4 and 1)"
            )
        self.low_freq_factor, self.high_freq_factor = (
            float(low_freq_factor),
            float(high_freq_factor),
        )

    def inv_freq(self, theta: float, dim: int, length: Tensor | None = None) -> Tensor:
        inv = base_inv_freq(theta, dim)
        low_wavelen, high_wavelen = (
            self.original / self.low_freq_factor,
            self.original / self.high_freq_factor,
        )
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wavelen, inv / self.factor, inv)
        smooth = (self.original / wavelen - self.low_freq_factor) / (
            self.high_freq_factor - self.low_freq_factor
        )
        smoothed = (1 - smooth) * scaled / self.factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, scaled)
