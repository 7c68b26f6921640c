"""Batches as pure functions of (seed, rank, global batch index), and the loaders that walk them.

Training batches are random windows, as nanoGPT's ``get_batch``, but batch ``i`` on rank
``r`` is drawn from ``np.random.default_rng([seed, r, i])``: it depends on nothing else, so

* resuming is exact: the loader only needs to remember how many batches were consumed
  (``ResumableLoader.state_dict()``, which Lightning saves in the checkpoint and hands
  back through ``load_state_dict`` on ``fit(ckpt_path=...)``);
* ranks differ: each rank has its own random stream (windows of two ranks may overlap by
  chance, exactly as with nanoGPT's per-rank seeds, but the streams are independent);
* worker processes split the indices (worker ``w`` of ``W`` makes batches ``w, w+W, ...``)
  and PyTorch returns them in index order, so ``num_workers`` never changes the data.

Evaluation batches are fixed, non-overlapping windows over the split (window ``j`` starts
at ``j * block_size`` and holds ``block_size + 1`` tokens, so consecutive windows share one
token and every token after the first is a target exactly once). Rank ``r`` of ``R`` takes
windows ``r, r+R, r+2R, ...`` (strided like ``DistributedSampler``); the last
``n_windows % R`` windows are dropped so every rank runs the same number of batches and no
window is counted twice. With one process nothing is dropped.

Legend: ``B`` batch size, ``T`` block size (tokens per window minus one).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

Batch = dict[str, torch.Tensor]


def resolve_rank(trainer: Any = None) -> tuple[int, int]:
    """(rank, world size) of the data-parallel group, from the attached Lightning trainer's
    strategy (under tensor parallelism the ranks that split one model read the same batches),
    else torch.distributed, else (0, 1)."""
    if trainer is not None:
        shard = getattr(trainer.strategy, "distributed_sampler_kwargs", None)
        if shard:  # DDP, FSDP: every process; FSDP2 x TP: the data-parallel mesh dimension
            return int(shard["rank"]), int(shard["num_replicas"])
        return int(trainer.global_rank), int(trainer.world_size)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


class TokenArray:
    """A token file opened lazily in each process (pickling sends the path, never the data)."""

    def __init__(self, array: np.ndarray) -> None:
        self._array: np.ndarray | None = array
        self._path = getattr(array, "filename", None)
        self._dtype, self._len = array.dtype, len(array)

    def __len__(self) -> int:
        return self._len

    @property
    def array(self) -> np.ndarray:
        if self._array is None:
            self._array = np.memmap(self._path, dtype=self._dtype, mode="r")
        return self._array

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self._path is not None:
            state["_array"] = None
        return state


class RandomWindows:
    """Training batch ``i`` of rank ``r``: ``B`` windows of ``T+1`` tokens at random offsets.

    Returns ``{"tokens": LongTensor [B, T+1]}``.
    """

    def __init__(
        self, tokens: np.ndarray, block_size: int, batch_size: int, seed: int, rank: int = 0
    ) -> None:
        assert len(tokens) >= block_size + 1, "checked by the datamodule with a clear message"
        self.tokens = TokenArray(tokens)
        self.block_size, self.batch_size, self.seed, self.rank = block_size, batch_size, seed, rank

    def __call__(self, i: int) -> Batch:
        rng = np.random.default_rng([self.seed, self.rank, i])
        # last start: n - T - 1
        starts = rng.integers(0, len(self.tokens) - self.block_size, size=self.batch_size)
        data = self.tokens.array
        # (B, T+1)
        x = np.stack([data[s : s + self.block_size + 1] for s in starts]).astype(np.int64)
        return {"tokens": torch.from_numpy(x)}


class FixedWindows:
    """Evaluation batch ``b`` of rank ``r``: this rank's share of the fixed windows, ``B`` at a
    time.

    Returns ``{"tokens": LongTensor [B', T+1]}`` with ``B' <= B`` for the last batch.
    """

    def __init__(
        self,
        tokens: np.ndarray,
        block_size: int,
        batch_size: int,
        rank: int = 0,
        world_size: int = 1,
        max_windows: int | None = None,
    ) -> None:
        self.tokens = TokenArray(tokens)
        self.block_size, self.batch_size = block_size, batch_size
        n = (len(tokens) - 1) // block_size  # windows of T+1 tokens starting at multiples of T
        if max_windows is not None:
            n = min(n, max_windows)
        self.n_windows = n
        # the tail n % world_size is dropped (same count on every rank)
        self.per_rank = n // world_size
        # strided, like DistributedSampler
        self.windows = np.arange(rank, self.per_rank * world_size, world_size)
        self.n_batches = math.ceil(self.per_rank / batch_size)

    def __len__(self) -> int:
        return self.n_batches

    def __call__(self, b: int) -> Batch:
        starts = self.windows[b * self.batch_size : (b + 1) * self.batch_size] * self.block_size
        data = self.tokens.array
        # (B', T+1)
        x = np.stack([data[s : s + self.block_size + 1] for s in starts]).astype(np.int64)
        return {"tokens": torch.from_numpy(x)}


class BatchStream(IterableDataset):
    """Yields ``make_batch(i)`` for ``i = start, start+1, ...`` up to the end of the epoch.

    With ``epoch_batches`` set, epoch ``e`` is batches ``[e*L, (e+1)*L)`` and iteration stops
    at the next multiple of ``L`` after ``start`` (so a resume mid-epoch finishes that
    epoch); without it the stream is endless and the trainer stops at ``max_steps``.
    Worker ``w`` of ``W`` produces indices ``start+w, start+w+W, ...``.
    """

    def __init__(
        self, make_batch: Callable[[int], Batch], epoch_batches: int | None = None, start: int = 0
    ) -> None:
        self.make_batch, self.epoch_batches, self.start = make_batch, epoch_batches, start

    def end(self) -> int | None:
        L = self.epoch_batches
        return None if L is None else (self.start // L + 1) * L

    def __iter__(self) -> Iterator[Batch]:
        info = get_worker_info()
        w, W = (info.id, info.num_workers) if info is not None else (0, 1)
        end = self.end()
        i = self.start + w
        while end is None or i < end:
            yield self.make_batch(i)
            i += W


class SizedBatchStream(BatchStream):
    """A ``BatchStream`` with a length (one epoch, ``epoch_batches``), for progress bars and
    so that Lightning needs no look-ahead batch to detect the epoch's end."""

    def __len__(self) -> int:
        assert self.epoch_batches is not None
        return self.epoch_batches


class EvalStream(IterableDataset):
    """Yields evaluation batches ``0 .. len-1`` (workers take every ``W``-th)."""

    def __init__(self, make_batch: Callable[[int], Batch], n_batches: int) -> None:
        self.make_batch, self.n_batches = make_batch, n_batches

    def __len__(self) -> int:
        return self.n_batches

    def __iter__(self) -> Iterator[Batch]:
        info = get_worker_info()
        w, W = (info.id, info.num_workers) if info is not None else (0, 1)
        for b in range(w, self.n_batches, W):
            yield self.make_batch(b)


class ResumableLoader(DataLoader):
    """A ``DataLoader`` over a ``BatchStream`` that Lightning checkpoints.

    Lightning 2.x saves ``state_dict()`` of every stateful train dataloader in the checkpoint
    (``fit_loop.on_save_checkpoint`` -> ``CombinedLoader._state_dicts``) and calls
    ``load_state_dict`` before iterating again on ``fit(ckpt_path=...)``
    (``fit_loop.setup_data`` -> ``_load_combined_loader_states``). The state is the number
    of batches the model consumed, so the first batch after a resume is the one the
    uninterrupted run would have seen next.

    ``lookahead``: batches the consumer fetches ahead of the step it runs. Lightning's
    ``_PrefetchDataFetcher`` fetches one batch ahead when the loader has no length (to
    detect the last batch) and none when it has one; the datamodule sets this accordingly.
    Worker prefetching is invisible here: only batches handed out count.
    """

    def __init__(
        self,
        stream: BatchStream,
        *,
        num_workers: int = 0,
        pin_memory: bool = False,
        lookahead: int = 0,
    ) -> None:
        super().__init__(
            stream,
            batch_size=None,
            num_workers=num_workers,
            pin_memory=pin_memory,
            persistent_workers=False,  # workers must see the new start position at every iter()
        )
        self.lookahead = lookahead
        # batches handed to the consumer so far (global index of the next one)
        self._handed_out = stream.start
        self._in_this_iter = 0

    def __iter__(self) -> Iterator[Batch]:  # type: ignore[override]
        self.dataset.start = self._handed_out
        self._in_this_iter = 0
        for batch in super().__iter__():
            self._handed_out += 1
            self._in_this_iter += 1
            yield batch

    @property
    def batches_consumed(self) -> int:
        return self._handed_out - min(self.lookahead, self._in_this_iter)

    def state_dict(self) -> dict[str, int]:
        return {"batches_consumed": self.batches_consumed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self._handed_out = int(state["batches_consumed"])
        self._in_this_iter = 0
