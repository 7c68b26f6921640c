"""Sentence-pair batches for translation, as pure functions of (seed, rank, batch index).

A batch is ``{"src_ids": [B, S], "src_mask": [B, S], "tgt_ids": [B, T], "tgt_mask": [B, T]}``
(LongTensors; masks are 1 on tokens, 0 on padding), right-padded with the tokenizer's pad
id. Both sides end with eos (truncated first to ``max_*_len - 1`` tokens); the task shifts
``tgt_ids`` right for teacher forcing.

Training: data epoch ``e`` is a permutation of the pairs drawn from ``default_rng([seed, e])``,
cut into global batches of ``B * world_size`` pairs (the last incomplete one is dropped);
rank ``r`` takes slice ``r`` of each global batch. With ``bucket_batches = k`` the pairs of
every ``k`` consecutive global batches are sorted by source length before cutting, and the
batch order is shuffled again, so a batch holds similar lengths (less padding).
Evaluation: pairs in file order, rank ``r`` of ``R`` takes pairs ``r, r+R, ...``; the last
``n % R`` pairs are dropped so every rank runs the same number of batches.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from src.data.pair_cache import Ragged

Batch = dict[str, torch.Tensor]


def collate_pairs(
    src: Ragged,
    tgt: Ragged,
    idx: np.ndarray,
    *,
    pad_id: int,
    eos_id: int,
    max_src_len: int,
    max_tgt_len: int,
) -> Batch:
    """Pad pairs ``idx`` into a batch (see the module docstring)."""
    out: Batch = {}
    for side, rag, max_len in (("src", src, max_src_len), ("tgt", tgt, max_tgt_len)):
        seqs = [rag[i][: max_len - 1] for i in idx]
        width = max(len(s) for s in seqs) + 1
        ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)  # (B, S) or (B, T)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for row, s in enumerate(seqs):
            ids[row, : len(s)] = torch.from_numpy(s.astype(np.int64))
            ids[row, len(s)] = eos_id
            mask[row, : len(s) + 1] = 1
        out[f"{side}_ids"], out[f"{side}_mask"] = ids, mask
    return out


class PairTrainBatches:
    """Training batch ``i`` of rank ``rank`` (deterministic in ``seed``, ``i``, ``rank``)."""

    def __init__(
        self,
        src: Ragged,
        tgt: Ragged,
        *,
        batch_size: int,
        seed: int,
        rank: int,
        world_size: int,
        pad_id: int,
        eos_id: int,
        max_src_len: int,
        max_tgt_len: int,
        bucket_batches: int = 0,
    ) -> None:
        self.src, self.tgt = src, tgt
        self.B, self.seed, self.rank, self.W = batch_size, seed, rank, world_size
        # global batches per pass over the data
        self.per_epoch = len(src) // (batch_size * world_size)
        self.bucket_batches = bucket_batches
        self.collate_kw = {
            "pad_id": pad_id,
            "eos_id": eos_id,
            "max_src_len": max_src_len,
            "max_tgt_len": max_tgt_len,
        }
        self._plan_epoch, self._plan = -1, np.zeros(0)

    def plan(self, epoch: int) -> np.ndarray:
        """Pair indices of the whole data epoch: (per_epoch, world_size, B)."""
        if epoch != self._plan_epoch:
            rng = np.random.default_rng([self.seed, epoch])
            G = self.B * self.W
            perm = rng.permutation(len(self.src))[: self.per_epoch * G]
            if self.bucket_batches:
                lengths = self.src.lengths[perm]
                chunk = self.bucket_batches * G
                for a in range(0, len(perm), chunk):
                    order = np.argsort(lengths[a : a + chunk], kind="stable")
                    perm[a : a + chunk] = perm[a : a + chunk][order]
                batches = perm.reshape(self.per_epoch, G)[rng.permutation(self.per_epoch)]
                perm = batches.reshape(-1)
            self._plan_epoch, self._plan = epoch, perm.reshape(self.per_epoch, self.W, self.B)
        return self._plan

    def __call__(self, i: int) -> Batch:
        epoch, k = divmod(i, self.per_epoch)
        return collate_pairs(self.src, self.tgt, self.plan(epoch)[k, self.rank], **self.collate_kw)


class PairEvalBatches:
    """Evaluation batch ``b`` of this rank: its strided share of the pairs, in file order."""

    def __init__(
        self,
        src: Ragged,
        tgt: Ragged,
        *,
        batch_size: int,
        rank: int,
        world_size: int,
        pad_id: int,
        eos_id: int,
        max_src_len: int,
        max_tgt_len: int,
    ) -> None:
        self.src, self.tgt, self.B = src, tgt, batch_size
        self.per_rank = len(src) // world_size
        self.indices = np.arange(rank, self.per_rank * world_size, world_size)
        self.n_batches = math.ceil(self.per_rank / batch_size)
        self.collate_kw = {
            "pad_id": pad_id,
            "eos_id": eos_id,
            "max_src_len": max_src_len,
            "max_tgt_len": max_tgt_len,
        }

    def __len__(self) -> int:
        return self.n_batches

    def __call__(self, b: int) -> Batch:
        return collate_pairs(
            self.src, self.tgt, self.indices[b * self.B : (b + 1) * self.B], **self.collate_kw
        )
