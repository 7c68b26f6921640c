"""``SyntheticDataModule``: a synthetic task's examples as pair batches, generated, never stored.

Batches have the pair format of docs/CONTRACTS.md, every row of a batch the same shape (a task's
examples at one length do not vary in size, so there is no padding)::

    src_ids [B, P]  the prompt        src_mask [B, P] all ones
    tgt_ids [B, A]  the answer        tgt_mask [B, A] all ones
    length  [B]     the task's size key (data.length, data.digits, data.num_pairs) of these examples

Training batch ``i`` of rank ``r`` holds examples ``(i·R + r)·B … + B - 1`` of the run seed's
training stream, so a batch is a pure function of (seed, rank, index), as every training batch here
is (``src.data.batches``): resuming needs only the count of batches consumed. By default every
training batch is at the training size. ``data.train_min_length`` trains on every size from it to
the training size instead, as Kazemnejad et al. 2023 (§3) train on all lengths up to L: batch ``i``
is at a size drawn uniformly from that range by ``(seed, i)``, the same on every rank, so a batch
still has one shape and no padding. Validation holds
``data.val_examples`` examples at the training length; the test has one loader per test length,
``data.test_examples`` each, the training length first. Rank ``r`` of ``R`` evaluates examples
``r, r+R, …``.

The tokenizer is ``char`` fitted on the task's ``vocabulary()``, so each symbol is one id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from src.data.batches import (
    ResumableLoader,
)
from src.data.datamodule_base import _BaseDataModule
from src.data.synthetic.base import Example, SyntheticSource
from src.data.tokenizers import Tokenizer
from src.errors import DataError

Batch = dict[str, torch.Tensor]
REFERENCE_EXAMPLES = 4096  # training answers an n-gram reference is fitted on


@dataclass
class AnswerCorpus:
    """Training answers, each read after a start symbol (the shape of
    ``src.data.datamodule.ReferenceCorpus`` that ``src.callbacks.ngram_reference`` fits on): a floor
    that never reads the prompt."""

    sequences: list[np.ndarray]
    start: bool = True


def collate(examples: Sequence[Example], length: int, ids: dict[str, int]) -> Batch:
    """Examples of one shape -> a pair batch (see the module docstring)."""
    src = torch.tensor([[ids[c] for c in ex.prompt] for ex in examples], dtype=torch.long)  # [B, P]
    tgt = torch.tensor([[ids[c] for c in ex.answer] for ex in examples], dtype=torch.long)  # [B, A]
    return {
        "src_ids": src,
        "src_mask": torch.ones_like(src),
        "tgt_ids": tgt,
        "tgt_mask": torch.ones_like(tgt),
        "length": torch.full((len(examples),), int(length), dtype=torch.long),
    }


# batch sizes draw from rng([run seed, 1, i]); examples from 5-part seeds (SyntheticSource.example)
LENGTH_STREAM = 1


class TrainBatches:
    """Training batch ``i`` of ``rank``: a pure function of (seed, rank, i). ``min_length`` (None:
    the training size) is the smallest size a batch is drawn at."""

    def __init__(
        self,
        source: SyntheticSource,
        ids: dict[str, int],
        batch_size: int,
        seed: int,
        rank: int,
        world_size: int,
        min_length: int | None = None,
    ) -> None:
        self.source, self.ids, self.B, self.seed, self.rank, self.W = (
            source,
            ids,
            batch_size,
            seed,
            rank,
            world_size,
        )
        self.min_length = source.train_length if min_length is None else int(min_length)

    def length(self, i: int) -> int:
        """The size of batch ``i``: uniform over [min_length, training size], by (seed, i) alone
        (every rank the same)."""
        top = self.source.train_length
        if self.min_length >= top:
            return top
        return int(
            np.random.default_rng([self.seed, LENGTH_STREAM, i]).integers(self.min_length, top + 1)
        )

    def __call__(self, i: int) -> Batch:
        first, n = (i * self.W + self.rank) * self.B, self.length(i)
        examples = [
            self.source.example("train", first + j, length=n, stream=self.seed)
            for j in range(self.B)
        ]
        return collate(examples, n, self.ids)


class EvalBatches:
    """Fixed evaluation examples of one split and length, this rank's strided share, in batches."""

    def __init__(
        self,
        examples: Sequence[Example],
        length: int,
        ids: dict[str, int],
        batch_size: int,
        rank: int,
        world_size: int,
    ) -> None:
        per_rank = len(examples) // world_size
        self.examples = [examples[k] for k in range(rank, per_rank * world_size, world_size)]
        self.length, self.ids, self.B = length, ids, batch_size

    def __len__(self) -> int:
        return -(-len(self.examples) // self.B)

    def __call__(self, b: int) -> Batch:
        return collate(self.examples[b * self.B : (b + 1) * self.B], self.length, self.ids)


class SyntheticDataModule(_BaseDataModule):
    """A synthetic task (``SyntheticSource``) -> pair batches; see the module docstring. The base
    holds the run values, rank resolution and the loaders; nothing is tokenized into a cache."""

    def __init__(
        self,
        source: SyntheticSource,
        tokenizer: Tokenizer,
        *,
        train_min_length: int | None = None,  # checked with the run (SyntheticSource.check_run)
        **run: Any,
    ) -> None:
        super().__init__(source, tokenizer, **run)
        self.source: SyntheticSource = source
        self.train_min_length = train_min_length
        self.ids: dict[str, int] = {}
        self.examples: dict[tuple[str, int], Sequence[Example]] = {}

    @property
    def test_lengths(self) -> list[int]:
        return self.source.test_lengths

    def prepare_data(self) -> None:
        """Nothing to prepare: examples are generated, never stored."""

    def prepare_tokenizer(self) -> Tokenizer:
        """Fit ``char`` on the task's symbols (a given vocabulary must hold them all); build the
        symbol -> id map."""
        tok, vocab = self.tokenizer, self.source.vocabulary()
        if getattr(tok, "fitted", None) is False:
            tok.fit(vocab)  # type: ignore[attr-defined]
        stoi = getattr(tok, "stoi", None)
        if stoi is None:
            raise DataError(
                f"data={self.source.name} needs tokenizer=char (one id per symbol), not "
                f"tokenizer={tok.name}"
            )
        missing = sorted(set(vocab) - set(stoi))
        if missing:
            raise DataError(
                f"data={self.source.name} uses the symbols {''.join(missing)!r}, which "
                "tokenizer.chars does not hold; set tokenizer.chars=null to fit it on the task"
            )
        self.ids = {c: int(stoi[c]) for c in vocab}
        return tok

    def setup(self, stage: str | None = None) -> None:
        if not self.ids:
            self.prepare_tokenizer()
        src = self.source
        if ("val", src.train_length) not in self.examples:
            self.examples[("val", src.train_length)] = src.examples("val", src.val_examples)
        for n in src.test_lengths:
            if ("test", n) not in self.examples:
                self.examples[("test", n)] = src.examples("test", src.test_examples, length=n)

    def reference_corpus(self) -> AnswerCorpus:
        """The answers of the first training examples of the run's stream, as token ids."""
        drawn = self.source.examples("train", REFERENCE_EXAMPLES, stream=self.seed)
        return AnswerCorpus(
            [np.array([self.ids[c] for c in ex.answer], dtype=np.int64) for ex in drawn]
        )

    def train_dataloader(self) -> ResumableLoader:
        rank, world = self.rank_world()
        make = TrainBatches(
            self.source, self.ids, self.batch_size, self.seed, rank, world, self.train_min_length
        )
        return self._train_loader(make, self.epoch_batches)

    def _eval(self, split: str, length: int) -> DataLoader:
        rank, world = self.rank_world()
        batches = EvalBatches(
            self.examples[(split, length)], length, self.ids, self.val_batch_size, rank, world
        )
        if not batches.examples:
            raise DataError(
                f"data={self.source.name}: "
                f"data.{split}_examples={len(self.examples[(split, length)])} is fewer than the "
                f"world size {world}; raise it"
            )
        return self._eval_loader(batches, len(batches))

    def val_dataloader(self) -> DataLoader:
        return self._eval("val", self.source.train_length)

    def test_dataloader(self) -> list[DataLoader]:
        """One loader per test length, the training length first."""
        return [self._eval("test", n) for n in self.source.test_lengths]
