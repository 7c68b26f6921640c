"""Smoothed n-gram references scored on exactly the tokens this run validates and tests.

A loss means little without a floor to beat: a character trigram reaches about 2.0 nats/char
on Tiny Shakespeare. This callback fits interpolated Kneser-Ney models of orders 1 … 4
(``src.evaluation.ngram``) on the training split, with the run's tokenisation, and scores them
on the very batches the validation loop and the test loop see (collected as they pass, so
``limit_val_batches``, ``max_val_windows`` and truncation all apply), each token with the
context that precedes it inside its window — or, for sentence pairs, inside its target
sentence after a start symbol (a target-side reference that never reads the source)::

    callbacks:
      ngram_reference:
        _target_: src.callbacks.ngram_reference.NgramReference
        orders: [1, 2, 3, 4]
        output_dir: ${paths.output_dir}
        cache_dir: ${data.cache_dir}     # fitted results are cached by content (runs of a study share them)

``<output_dir>/ngram.json`` holds ``{"val": {"3": {"loss": …, "tokens": …}, …}, "test": {…}}``
plus the training-token count and the smoothing; ``python -m src.report`` shows the rows in
its table and as lines on the loss plot. Fitting reads at most ``max_train_tokens`` training
tokens (the first ones; the file says when the cap applied).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
from lightning.pytorch.utilities import rank_zero_only

from src.callbacks.preemption import stop_if_preempted
from src.evaluation.ngram import KneserNey
from src.jsonfile import read_json, write_json

log = logging.getLogger(__name__)

FILENAME = "ngram.json"
SMOOTHING = (
    "interpolated Kneser-Ney, one discount per order D = n1/(n1 + 2 n2) from the training counts"
)


def batch_sequences(batch: Mapping[str, Any]) -> tuple[list[np.ndarray], bool]:
    """(token sequences, start symbol?) of a batch (docs/CONTRACTS.md formats): the rows of a
    text batch (first token context only), or each pair's target tokens up to its eos."""
    if "tokens" in batch:
        return [row for row in batch["tokens"].cpu().numpy().astype(np.int64)], False
    ids, mask = (
        batch["tgt_ids"].cpu().numpy().astype(np.int64),
        batch["tgt_mask"].cpu().numpy().astype(bool),
    )
    return [row[m] for row, m in zip(ids, mask)], True


def _digest(arrays: Sequence[np.ndarray]) -> str:
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        h.update(np.asarray(a, dtype=np.int64).tobytes())
        h.update(b"|")
    return h.hexdigest()


class NgramReference(pl.Callback):
    """n-gram reference losses on this run's validation and test tokens (module docstring)."""

    def __init__(
        self,
        orders: Sequence[int] = (1, 2, 3, 4),
        output_dir: str | None = None,
        cache_dir: str | None = None,
        max_train_tokens: int = 20_000_000,
    ) -> None:
        self.orders = sorted({int(o) for o in orders})
        if not self.orders or self.orders[0] < 1:
            raise ValueError(
                f"NgramReference: orders={list(orders)} must be positive integers, e.g. [1, 2, 3, "
                "4]"
            )
        self.output_dir, self.max_train_tokens = output_dir, int(max_train_tokens)
        self.cache_dir = Path(cache_dir).expanduser() / "ngram" if cache_dir else None
        self.collected: dict[str, list[np.ndarray]] = {"val": [], "test": []}
        self.start = False
        self.done: set[str] = set()
        self.result: dict[str, Any] = {}
        self._model: KneserNey | None = None
        self._train: tuple[list[np.ndarray], bool, bool, int, str] | None = None

    # ---------------------------------------------------------------- collecting
    def _collect(self, split: str, trainer: pl.Trainer, batch: Any) -> None:
        if split in self.done or trainer.sanity_checking:
            return
        seqs, self.start = batch_sequences(batch)
        self.collected[split] += seqs

    def on_validation_batch_start(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._collect("val", trainer, batch)

    def on_test_batch_start(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._collect("test", trainer, batch)

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._score("val", trainer)

    def on_test_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._score("test", trainer)

    # ---------------------------------------------------------------- scoring
    def _train_corpus(self, trainer: pl.Trainer) -> None:
        """The training sequences (capped), their digest and the vocabulary size, once."""
        if self._train is not None:
            return
        corpus = trainer.datamodule.reference_corpus()  # type: ignore[union-attr]
        seqs: list[np.ndarray] = []
        n = 0
        for i, s in enumerate(corpus.sequences):
            if i % 1024 == 0:
                stop_if_preempted(trainer)
            take = np.asarray(s[: self.max_train_tokens - n])
            seqs.append(take)
            n += len(take)
            if n >= self.max_train_tokens:
                break
        capped = n < sum(len(s) for s in corpus.sequences)
        vocab = int(getattr(trainer.datamodule.tokenizer, "vocab_size", 0) or 0)  # type: ignore[union-attr]
        vocab = max([vocab, *(int(np.max(s)) + 1 for s in seqs if len(s))])
        self._train = (seqs, corpus.start, capped, vocab, _digest(seqs))

    @rank_zero_only
    def _score(self, split: str, trainer: pl.Trainer) -> None:
        if split in self.done or not self.collected[split]:
            return
        self._train_corpus(trainer)
        seqs, start, capped, vocab, digest = self._train  # type: ignore[misc]
        scored = self.collected[split]
        key = f"{digest}-{_digest(scored)}-{int(start)}-{vocab}-{'.'.join(map(str, self.orders))}"
        figures = read_json(self.cache_dir / f"{key}.json") if self.cache_dir else None
        if figures is None:
            if self._model is None:
                # a preemption signal ends a long fit between its orders
                self._model = KneserNey(max(self.orders), vocab).fit(
                    seqs, start=start, stop=lambda: stop_if_preempted(trainer)
                )
            figures = {
                str(k): dict(
                    zip(
                        ("loss", "tokens"),
                        self._model.nll(scored, k, n_context=1, start=self.start),
                    )
                )
                for k in self.orders
            }
            if self.cache_dir:
                write_json(self.cache_dir / f"{key}.json", figures)
        self.result.update(
            {
                "smoothing": SMOOTHING,
                "orders": self.orders,
                "vocab_size": vocab,
                "train_tokens": int(sum(len(s) for s in seqs)),
                "train_capped": capped,
                "scored": "target sentences after a start symbol"
                if self.start
                else "every window token after the first, with the window's preceding tokens",
                split: figures,
            }
        )
        self.done.add(split)
        self.collected[split] = []
        log.info(
            "n-gram reference (%s): %s",
            split,
            ", ".join(f"{k}-gram {v['loss']:.3f}" for k, v in figures.items()),
        )
        if self.output_dir:
            write_json(Path(self.output_dir) / FILENAME, self.result)
