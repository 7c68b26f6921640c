"""The rule mini-language: one of our tensors <-> the Hugging Face tensor(s) it is made of.

A format's adapter lists rules; the same list converts in both directions (``load`` takes
from a ``Checkpoint``, ``save`` gives the Hugging Face tensors back). ``Checkpoint`` hands
each tensor out at most once, so whatever no rule takes is visible as a leftover.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from src.errors import HFConversionError
from src.models.config import ModelConfig


class Checkpoint:
    """The Hugging Face tensors being converted. Each is taken at most once; leftovers are an
    error."""

    def __init__(self, tensors: Mapping[str, Tensor], model_type: str) -> None:
        self.model_type = model_type
        self.tensors = dict(tensors)
        self.dropped: list[str] = []

    def take(self, key: str) -> Tensor:
        if key not in self.tensors:
            near = sorted(self.tensors)[:6]
            raise HFConversionError(
                f"{self.model_type} checkpoint has no tensor '{key}' (it holds {len(self.tensors)} "
                f"more, e.g. {near}); is it a checkpoint of a different architecture or of the "
                "base model without the task head?"
            )
        return self.tensors.pop(key)

    def take_optional(self, key: str) -> Tensor | None:
        return self.tensors.pop(key, None)

    def drop(self, pattern: str) -> int:
        """Discard tensors whose key matches ``pattern`` (the adapter says why); returns how
        many."""
        keys = [k for k in self.tensors if re.search(pattern, k)]
        for key in keys:
            self.dropped.append(key)
            del self.tensors[key]
        return len(keys)

    def finish(self) -> None:
        if self.tensors:
            raise HFConversionError(
                f"{self.model_type} checkpoint has tensors that no conversion rule consumes: "
                f"{sorted(self.tensors)[:10]}{' …' if len(self.tensors) > 10 else ''}. Converting "
                "would silently lose weights; add a rule (or an explicit drop with its reason) to "
                f"the '{self.model_type}' adapter in src/models/hf/formats/{self.model_type}.py"
            )


@dataclass(frozen=True)
class Same:
    """One tensor with the same layout on both sides."""

    ours: str
    theirs: str

    def load(self, ckpt: Checkpoint) -> Tensor:
        return ckpt.take(self.theirs)

    def save(self, x: Tensor) -> dict[str, Tensor]:
        return {self.theirs: x}


@dataclass(frozen=True)
class Transposed(Same):
    """GPT-2's ``Conv1D`` stores its weight as [in, out] (y = x W + b); ``nn.Linear`` stores
    [out, in] (y = x Wᵀ + b), so the weight is transposed (nanoGPT's ``from_pretrained``)."""

    def load(self, ckpt: Checkpoint) -> Tensor:
        return ckpt.take(self.theirs).t()  # [in, out] -> [out, in]

    def save(self, x: Tensor) -> dict[str, Tensor]:
        return {self.theirs: x.t()}  # [out, in] -> [in, out]


@dataclass(frozen=True)
class Fused:
    """Separate projections stacked along the output dim: [q | k | v] for our ``attn.qkv``
    (H·D, K·D, K·D rows), [k | v] for ``cross_attn.kv``; biases likewise."""

    ours: str
    theirs: tuple[str, ...]
    sizes: tuple[int, ...]

    def load(self, ckpt: Checkpoint) -> Tensor:
        parts = [ckpt.take(k) for k in self.theirs]
        got = tuple(p.shape[0] for p in parts)
        if got != self.sizes:
            raise HFConversionError(
                f"{self.theirs} have {got} rows, but our {self.ours} expects {self.sizes}"
            )
        return torch.cat(parts, dim=0)  # n × [rows_i, C] -> [Σ rows_i, C]

    def save(self, x: Tensor) -> dict[str, Tensor]:
        # [Σ rows_i, C] -> n × [rows_i, C]
        return dict(zip(self.theirs, x.split(list(self.sizes), dim=0)))


@dataclass(frozen=True)
class FoldedSegment:
    """BERT adds ``token_type_embeddings[segment]`` to every token. We have no segment
    embeddings, and with all segment ids 0 (single sentences, our MLM) that row is a constant,
    so it is folded into the position table: table[p] = position[p] + token_type[0].
    Exported, the position table goes back unchanged and token types become zero rows."""

    ours: str
    position: str
    token_type: str
    n_types: int = 2

    def load(self, ckpt: Checkpoint) -> Tensor:
        pos, types = ckpt.take(self.position), ckpt.take(self.token_type)  # [P, C], [n_types, C]
        return pos + types[0]  # rows 1.. (second segment) are unused by single-segment inputs

    def save(self, x: Tensor) -> dict[str, Tensor]:
        return {self.position: x, self.token_type: x.new_zeros(self.n_types, x.shape[1])}


@dataclass(frozen=True)
class Constant:
    """A Hugging Face tensor we compute instead of storing (a sinusoid table, a zero bias).
    Loading checks the checkpoint's copy (if any) against it, so a trained value is never lost."""

    theirs: str
    value: Tensor
    why: str
    ours: None = None

    def load(self, ckpt: Checkpoint) -> None:
        t = ckpt.take_optional(self.theirs)
        # half-precision checkpoints round
        atol = 1e-4 if t is not None and t.dtype == torch.float32 else 1e-2
        if t is not None and not torch.allclose(t.float(), self.value.float(), atol=atol, rtol=0):
            raise HFConversionError(
                f"{ckpt.model_type} tensor '{self.theirs}' differs from what we compute: {self.why}"
            )

    def save(self, x: None) -> dict[str, Tensor]:
        return {self.theirs: self.value}


Rule = Same | Fused | FoldedSegment | Constant


def linear(ours: str, theirs: str, bias: bool, rule: type[Same] = Same) -> list[Rule]:
    """A linear layer or a norm: ``.weight`` by ``rule``, ``.bias`` (1-D, never transposed) as
    is."""
    out: list[Rule] = [rule(f"{ours}.weight", f"{theirs}.weight")]
    return out + [Same(f"{ours}.bias", f"{theirs}.bias")] if bias else out


def fused_linear(
    ours: str, theirs: tuple[str, ...], sizes: tuple[int, ...], bias: bool
) -> list[Rule]:
    """Our one projection from several of theirs, weights and biases stacked alike."""
    out: list[Rule] = [Fused(f"{ours}.weight", tuple(f"{t}.weight" for t in theirs), sizes)]
    return out + [Fused(f"{ours}.bias", tuple(f"{t}.bias" for t in theirs), sizes)] if bias else out


def qkv_sizes(c: ModelConfig) -> tuple[int, int, int]:
    """Rows of q, k and v in our fused ``attn.qkv``: H·D, K·D, K·D."""
    return c.n_head * c.head_dim, c.kv_heads * c.head_dim, c.kv_heads * c.head_dim
