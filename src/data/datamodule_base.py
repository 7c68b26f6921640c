"""The base of the token datamodules: the token cache directory, the tokenizer check against
it, rank resolution, and the train and eval loaders (``src.data.datamodule`` builds on it)."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightning as L
from torch.utils.data import DataLoader

from src.data.batches import (
    BatchStream,
    EvalStream,
    ResumableLoader,
    SizedBatchStream,
    resolve_rank,
)
from src.data.cache import read_meta, token_dir_for
from src.data.sources.base import Source
from src.data.sources.openwebtext import BinDir
from src.data.token_check import check_token_ids
from src.data.tokenizers import Tokenizer, tokenizer_from_state
from src.errors import DataError

log = logging.getLogger(__name__)

# Lightning warns for every IterableDataset with __len__ that workers might duplicate data; ours
# split batch indices across workers, so the length is exact with any number of workers.
warnings.filterwarnings("ignore", message=r"Your `IterableDataset` has `__len__` defined")


def adopt_vocabulary(tokenizer: Tokenizer, state: Mapping[str, Any]) -> None:
    """Give an unfitted tokenizer (``char``) the vocabulary stored with a token cache."""
    if getattr(tokenizer, "fitted", True) or state.get("name") != tokenizer.name:
        return
    tokenizer.__dict__.update(tokenizer_from_state(state).__dict__)


class _BaseDataModule(L.LightningDataModule):
    """Shared: the token cache directory, the tokenizer check, rank resolution, loaders."""

    def __init__(
        self,
        source: Source,
        tokenizer: Tokenizer,
        *,
        block_size: int,
        batch_size: int,
        seed: int = 0,
        num_workers: int = 0,
        pin_memory: bool = False,
        epoch_batches: int | None = None,
        val_batch_size: int | None = None,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        super().__init__()
        for key, value in (("block_size", block_size), ("batch_size", batch_size)):
            if int(value) < 1:
                raise DataError(f"data.{key}={value!r} is invalid: it must be a positive integer")
        if epoch_batches is not None and int(epoch_batches) < 1:
            raise DataError(
                f"data.epoch_batches={epoch_batches!r} is invalid: a positive number of batches, "
                "or null"
            )
        self.source, self.tokenizer = source, tokenizer
        self.block_size, self.batch_size, self.seed = int(block_size), int(batch_size), int(seed)
        self.val_batch_size = int(val_batch_size or batch_size)
        self.num_workers, self.pin_memory = int(num_workers), bool(pin_memory)
        self.epoch_batches = None if epoch_batches is None else int(epoch_batches)
        self._rank, self._world_size = rank, world_size
        #: ids must be below this (the run sets model.vocab_size once the tokenizer is final); None:
        #: the tokenizer's
        self.vocab_size: int | None = None
        self._dir: Path | None = None
        self.meta: dict[str, Any] | None = None
        self._last_train_loader: ResumableLoader | None = None

    # ------------------------------------------------------------ where and who

    def rank_world(self) -> tuple[int, int]:
        """(rank, world size): explicit arguments, else the trainer's, else torch.distributed's."""
        rank, world = resolve_rank(getattr(self, "trainer", None))
        return (self._rank if self._rank is not None else rank), (
            self._world_size if self._world_size is not None else world
        )

    @property
    def token_dir(self) -> Path:
        """Directory of the tokenized corpus (the cache entry, or a prepared bin directory)."""
        if self._dir is None:
            src = self.source
            self._dir = src.dir if isinstance(src, BinDir) else token_dir_for(src, self.tokenizer)
        return self._dir

    def _check_tokenizer(self, meta: Mapping[str, Any]) -> None:
        adopt_vocabulary(self.tokenizer, meta["tokenizer"])
        if dict(meta["tokenizer"]) != self.tokenizer.state_dict():
            raise DataError(
                f"{self.token_dir} was tokenized with {meta['tokenizer']} but the run uses "
                f"{self.tokenizer.state_dict()}; re-run python -m src.prepare with this tokenizer "
                f"or choose tokenizer={meta['tokenizer'].get('name')}"
            )

    def _no_test_split(self) -> DataError:
        return DataError(
            f"data={self.source.name}: {self.token_dir} has no test split (prepared before every "
            "source had one); re-run python -m src.prepare (or delete the directory to tokenize "
            "again): verdicts are read on test, distinct from val"
        )

    def _build(self) -> dict[str, Any]:
        raise NotImplementedError

    def _check_ids(self, array: Any, where: Path | str) -> None:
        """Every token id below the vocabulary (``src.data.token_check``: one chunked pass,
        remembered)."""
        if self.vocab_size is not None:
            limit, bound = int(self.vocab_size), f"model.vocab_size={self.vocab_size}"
        else:
            limit, bound = (
                self.tokenizer.vocab_size,
                f"tokenizer={self.tokenizer.name} has {self.tokenizer.vocab_size} ids",
            )
        check_token_ids(array, limit, where=where, bound=bound)

    def ensure_tokens(self) -> dict[str, Any]:
        """Tokenize into the cache unless done; fit the tokenizer's vocabulary from it. Returns
        ``meta``."""
        if self.meta is None:
            d = self.token_dir
            meta = read_meta(d)
            if meta is None:
                log.info("tokenizing data=%s into %s", self.source.name, d)
                meta = self._build()
            self._check_tokenizer(meta)
            self.meta = meta
        return self.meta

    # ------------------------------------------------------------ Lightning hooks

    def prepare_tokenizer(self) -> Tokenizer:
        """Make ``tokenizer.vocab_size`` final before the model is built (fits ``char`` on the
        corpus)."""
        if not getattr(self.tokenizer, "fitted", True):
            self.ensure_tokens()
        return self.tokenizer

    def prepare_data(self) -> None:
        self.ensure_tokens()

    def _train_loader(self, make_batch: Any, epoch_batches: int | None) -> ResumableLoader:
        # a reloaded train loader (reload_dataloaders_every_n_epochs) continues where the last one
        # stopped
        start = (
            self._last_train_loader.batches_consumed if self._last_train_loader is not None else 0
        )
        stream = (
            SizedBatchStream(make_batch, epoch_batches, start)
            if epoch_batches
            else BatchStream(make_batch, None, start)
        )
        # Lightning fetches one batch ahead only for loaders without a length
        lookahead = 1 if epoch_batches is None and getattr(self, "trainer", None) is not None else 0
        loader = ResumableLoader(
            stream, num_workers=self.num_workers, pin_memory=self.pin_memory, lookahead=lookahead
        )
        self._last_train_loader = loader
        return loader

    def _eval_loader(self, make_batch: Any, n_batches: int) -> DataLoader:
        return DataLoader(
            EvalStream(make_batch, n_batches),
            batch_size=None,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
        )
