"""Key/value cache for incremental decoding.

Each layer's keys and values are written into a preallocated buffer [B, K, L, D] so a
decoding step costs one slice write instead of a concatenation of the whole history.
Cross-attention keys/values (encoder-decoder) are computed once and kept in ``cross``.

A layer with a sliding window of W keys (``windows[layer]``, Mistral's rolling buffer cache,
Jiang et al. 2023 §2) keeps only its last W keys/values: its memory stays flat however long the
generation runs. ``update`` returns the kept keys followed by the new ones, so the layer's keys
start at position max(0, offset - W) (``Stack`` builds that layer's mask from there).

A recurrent mixer layer (``model/mixer``) keeps no keys: its fixed-size state (``states``) is
all it needs to continue, so its memory stays flat too.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from src.models.components.sinks import SinkKeys


class KVCache:
    def __init__(
        self, n_layer: int, max_length: int | None = None, windows: list[int | None] | None = None
    ) -> None:
        self.n_layer = n_layer
        self.max_length = max_length
        self.windows = list(windows) if windows is not None else [None] * n_layer
        self.offset = 0  # tokens already cached (before the current forward)
        self._k: list[Tensor | None] = [None] * n_layer
        self._v: list[Tensor | None] = [None] * n_layer
        self.cross: list[tuple[Tensor, Tensor] | None] = [None] * n_layer
        # the sink tokens' keys and values (model/sinks=token): computed once, never rolled out
        self.sinks: SinkKeys | None = None
        # a recurrent mixer layer's state (src/models/mixers/) in place of its keys and values:
        # a tensor or tuple of tensors with the batch first, None before the first token
        self.states: list[Any] = [None] * n_layer

    def update(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """k, v: [B, K, T, D] for the new tokens -> all keys/values so far [B, K, offset+T, D]
        (a rolling layer: the last min(offset, W) then the new ones)."""
        end = self.offset + k.shape[2]
        window = self.windows[layer]
        if window is not None:  # rolling: [B, K, min(offset, W) + T, D] out, the last W kept
            prev_k, prev_v = self._k[layer], self._v[layer]
            k = k if prev_k is None else torch.cat([prev_k, k], dim=2)
            v = v if prev_v is None else torch.cat([prev_v, v], dim=2)
            self._k[layer], self._v[layer] = k[:, :, -window:], v[:, :, -window:]
            return k, v
        if self.max_length is None:
            prev_k, prev_v = self._k[layer], self._v[layer]
            self._k[layer] = k if prev_k is None else torch.cat([prev_k, k], dim=2)
            self._v[layer] = v if prev_v is None else torch.cat([prev_v, v], dim=2)
            return self._k[layer], self._v[layer]  # type: ignore[return-value]
        if end > self.max_length:
            raise ValueError(
                f"KV cache holds {self.max_length} positions; generation asked for {end}"
            )
        if self._k[layer] is None:
            B, K, _, D = k.shape
            self._k[layer] = k.new_empty(B, K, self.max_length, D)
            self._v[layer] = v.new_empty(B, K, self.max_length, D)
        buf_k, buf_v = self._k[layer], self._v[layer]
        buf_k[:, :, self.offset : end] = k  # type: ignore[index]
        buf_v[:, :, self.offset : end] = v  # type: ignore[index]
        return buf_k[:, :, :end], buf_v[:, :, :end]  # type: ignore[index]

    def stored_length(self, layer: int) -> int:
        """Positions the cache holds for ``layer`` (a preallocated buffer counts whole)."""
        k = self._k[layer]
        return 0 if k is None else k.shape[2]

    def advance(self, n: int) -> None:
        """Called by the model once every layer has written its ``n`` new positions."""
        self.offset += n

    def reorder(self, index: Tensor) -> None:
        """Select batch rows (beam search / dropping finished rows)."""
        for i in range(self.n_layer):
            if self._k[i] is not None:
                self._k[i] = self._k[i].index_select(0, index)  # type: ignore[union-attr]
                self._v[i] = self._v[i].index_select(0, index)  # type: ignore[union-attr]
            if self.cross[i] is not None:
                k, v = self.cross[i]  # type: ignore[misc]
                self.cross[i] = (k.index_select(0, index), v.index_select(0, index))
            state = self.states[i]
            if isinstance(state, Tensor):
                self.states[i] = state.index_select(0, index)
            elif state is not None:
                self.states[i] = tuple(s.index_select(0, index) for s in state)
