"""Lightning datamodules: ``LMDataModule`` (text -> token windows) and ``PairDataModule``
(sentence pairs -> padded batches), and ``build_datamodule`` which picks one by source kind.

Order of calls (``src.training.setup.build_run``)::

    dm = build_datamodule(plain["data"], tokenizer, block_size=..., batch_size=..., seed=...)
    dm.prepare_tokenizer()        # fits a char vocabulary on the corpus (cached); no-op for gpt2/hf
    resolve_vocab(plain, tokenizer, n_reserved)   # model.vocab_size from the (fitted) tokenizer
    task = TASKS.get(name)(plain, tokenizer.state_dict())  # the objective builds the model from plain["model"]
    trainer.fit(task, datamodule=dm, ckpt_path=...)   # prepare_data -> setup -> loaders

Batches follow docs/CONTRACTS.md. Training batches are functions of (seed, rank, batch
index) (``src.data.batches``); the train loader is stateful, so Lightning's checkpoint
carries its position and ``fit(ckpt_path=...)`` resumes on the exact next batch.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
from torch.utils.data import DataLoader

from src.data.batches import (
    BatchStream,
    EvalStream,
    FixedWindows,
    RandomWindows,
    ResumableLoader,
    SizedBatchStream,
    resolve_rank,
)
from src.data.cache import (
    open_pairs,
    open_tokens,
    read_meta,
    token_dir_for,
    write_pair_dir,
    write_token_dir,
)
from src.data.pairs import PairEvalBatches, PairTrainBatches
from src.data.sources import build_source, split_config
from src.data.sources.base import LMSource, PairSource, Source
from src.data.sources.openwebtext import BinDir
from src.data.synthetic.datamodule import SyntheticDataModule
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


@dataclass
class ReferenceCorpus:
    """Token sequences of the training split for reference models (``src.evaluation.ngram``);
    ``start``: each sequence is scored from its first token, after a start symbol."""

    sequences: list[np.ndarray]
    start: bool


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


class LMDataModule(_BaseDataModule):
    """Text corpus -> ``{"tokens": LongTensor [B, block_size+1]}`` batches.

    Train: random windows (endless, or ``epoch_batches`` per epoch). Val/test: the fixed
    windows of the split, sharded across ranks (``max_val_windows`` caps them).
    """

    def __init__(
        self,
        source: LMSource | BinDir,
        tokenizer: Tokenizer,
        *,
        block_size: int,
        batch_size: int,
        seed: int = 0,
        num_workers: int = 0,
        pin_memory: bool = False,
        epoch_batches: int | None = None,
        val_batch_size: int | None = None,
        max_val_windows: int | None = None,
        num_proc: int = 1,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        super().__init__(
            source,
            tokenizer,
            block_size=block_size,
            batch_size=batch_size,
            seed=seed,
            num_workers=num_workers,
            pin_memory=pin_memory,
            epoch_batches=epoch_batches,
            val_batch_size=val_batch_size,
            rank=rank,
            world_size=world_size,
        )
        self.max_val_windows = max_val_windows
        self.num_proc = int(num_proc)

    def _build(self) -> dict[str, Any]:
        src = self.source
        if isinstance(src, BinDir):
            src.bin_path("train"), src.bin_path("val")  # raise "run src.prepare first"
            raise src.not_prepared("meta.json")
        return write_token_dir(
            src.splits(),
            self.tokenizer,
            self.token_dir,
            source=src.name,
            separate=src.separate_documents,
            fingerprint=src.fingerprint(),
            num_proc=self.num_proc,
        )

    def setup(self, stage: str | None = None) -> None:
        meta = self.ensure_tokens()
        self.tokens = {s: open_tokens(self.token_dir, s, meta) for s in meta["tokens"]}
        for split, array in self.tokens.items():
            self._check_ids(array, self.token_dir / f"{split}.bin")
        if (
            "test" not in self.tokens
        ):  # a prepared directory from before test splits (sources always make one)
            raise self._no_test_split()
        need = self.block_size + 1
        for split in ("train", "val", "test"):
            if len(self.tokens[split]) < need:
                raise DataError(
                    f"data={self.source.name}: the {split} split has {len(self.tokens[split])} "
                    f"tokens but one window needs block_size+1 = {need}; use more text or a "
                    "smaller block_size (model.max_seq_len)"
                )

    def _windows(self, split: str) -> FixedWindows:
        rank, world = self.rank_world()
        w = FixedWindows(
            self.tokens[split],
            self.block_size,
            self.val_batch_size,
            rank,
            world,
            self.max_val_windows,
        )
        if w.per_rank == 0:
            raise DataError(
                f"data={self.source.name}: the {split} split has {w.n_windows} windows of "
                f"block_size+1 = {self.block_size + 1} tokens, fewer than the world size {world}, "
                f"so some rank would get none; use more {split} text, a smaller block_size or "
                "fewer devices"
            )
        return w

    def reference_corpus(self) -> ReferenceCorpus:
        """The training split as one token sequence (what an n-gram reference is fitted on)."""
        return ReferenceCorpus([np.asarray(self.tokens["train"])], start=False)

    def train_dataloader(self) -> ResumableLoader:
        rank, _ = self.rank_world()
        return self._train_loader(
            RandomWindows(self.tokens["train"], self.block_size, self.batch_size, self.seed, rank),
            self.epoch_batches,
        )

    def val_dataloader(self) -> DataLoader:
        w = self._windows("val")
        return self._eval_loader(w, len(w))

    def test_dataloader(self) -> DataLoader:
        w = self._windows("test")
        return self._eval_loader(w, len(w))


class PairDataModule(_BaseDataModule):
    """Sentence pairs -> ``{"src_ids","src_mask","tgt_ids","tgt_mask"}`` batches
    (``src.data.pairs``).

    ``epoch_batches`` null means one pass over the training pairs per epoch.
    ``max_src_len``/``max_tgt_len`` (default ``block_size``) include the final eos.
    """

    def __init__(
        self,
        source: PairSource,
        tokenizer: Tokenizer,
        *,
        block_size: int,
        batch_size: int,
        seed: int = 0,
        num_workers: int = 0,
        pin_memory: bool = False,
        epoch_batches: int | None = None,
        val_batch_size: int | None = None,
        max_src_len: int | None = None,
        max_tgt_len: int | None = None,
        bucket_batches: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        super().__init__(
            source,
            tokenizer,
            block_size=block_size,
            batch_size=batch_size,
            seed=seed,
            num_workers=num_workers,
            pin_memory=pin_memory,
            epoch_batches=epoch_batches,
            val_batch_size=val_batch_size,
            rank=rank,
            world_size=world_size,
        )
        if tokenizer.eos_token_id is None or tokenizer.pad_token_id is None:
            raise DataError(
                f"data={source.name} needs a tokenizer with eos and pad ids (pair batches end the "
                f"target with eos and pad on the right); tokenizer={tokenizer.name} has "
                f"eos={tokenizer.eos_token_id}, pad={tokenizer.pad_token_id}; use tokenizer=gpt2 "
                "or tokenizer=hf"
            )
        self.max_src_len = int(max_src_len or block_size)
        self.max_tgt_len = int(max_tgt_len or block_size)
        self.bucket_batches = int(bucket_batches or 0)

    def _build(self) -> dict[str, Any]:
        src = self.source
        assert isinstance(src, PairSource)
        return write_pair_dir(
            src.pairs(),
            self.tokenizer,
            self.token_dir,
            source=src.name,
            fingerprint=src.fingerprint(),
        )

    @property
    def _collate_kw(self) -> dict[str, int]:
        return {
            "pad_id": int(self.tokenizer.pad_token_id),
            "eos_id": int(self.tokenizer.eos_token_id),  # type: ignore[arg-type]
            "max_src_len": self.max_src_len,
            "max_tgt_len": self.max_tgt_len,
        }

    def setup(self, stage: str | None = None) -> None:
        meta = self.ensure_tokens()
        self.pairs = {s: open_pairs(self.token_dir, s) for s in meta["pairs"]}
        for split, sides in self.pairs.items():
            for side, ragged in zip(("src", "tgt"), sides):
                self._check_ids(ragged.tokens, f"{self.token_dir / split}.npz ({side})")
        if "test" not in self.pairs:
            raise self._no_test_split()

    def reference_corpus(self) -> ReferenceCorpus:
        """The training targets as the batches hold them (truncated, eos appended), each after a
        start symbol: what a target-side n-gram reference is fitted on."""
        _, tgt = self.pairs["train"]
        eos = np.array([self.tokenizer.eos_token_id], dtype=np.int64)
        return ReferenceCorpus(
            [
                np.concatenate([np.asarray(tgt[i][: self.max_tgt_len - 1], dtype=np.int64), eos])
                for i in range(len(tgt))
            ],
            start=True,
        )

    def train_dataloader(self) -> ResumableLoader:
        rank, world = self.rank_world()
        src, tgt = self.pairs["train"]
        batches = PairTrainBatches(
            src,
            tgt,
            batch_size=self.batch_size,
            seed=self.seed,
            rank=rank,
            world_size=world,
            bucket_batches=self.bucket_batches,
            **self._collate_kw,
        )
        if batches.per_epoch == 0:
            raise self._too_few_pairs(
                "train",
                len(src),
                self.batch_size * world,
                f"batch_size {self.batch_size} x world size {world}",
            )
        return self._train_loader(batches, self.epoch_batches or batches.per_epoch)

    def _too_few_pairs(self, split: str, n_pairs: int, needed: int, why: str) -> DataError:
        return DataError(
            f"data={self.source.name}: the {split} split has {n_pairs} pairs, fewer than {needed} "
            f"({why}); use a smaller batch size or fewer devices"
        )

    def _eval(self, split: str) -> DataLoader:
        rank, world = self.rank_world()
        src, tgt = self.pairs[split]
        batches = PairEvalBatches(
            src,
            tgt,
            batch_size=self.val_batch_size,
            rank=rank,
            world_size=world,
            **self._collate_kw,
        )
        if batches.per_rank == 0:
            raise self._too_few_pairs(split, len(src), world, f"one per rank, world size {world}")
        return self._eval_loader(batches, len(batches))

    def val_dataloader(self) -> DataLoader:
        return self._eval("val")

    def test_dataloader(self) -> DataLoader:
        return self._eval("test")


def build_datamodule(
    data_cfg: Mapping[str, Any],
    tokenizer: Tokenizer,
    *,
    block_size: int,
    batch_size: int,
    seed: int,
    num_workers: int = 0,
    pin_memory: bool = False,
    rank: int | None = None,
    world_size: int | None = None,
) -> LMDataModule | PairDataModule | SyntheticDataModule:
    """From the ``data`` config node: the source by ``name``, the datamodule by the source's kind.

    ``rank``/``world_size`` default to the trainer's (or torch.distributed's) at loader time;
    pass them only to simulate ranks.
    """
    try:
        from omegaconf import DictConfig, OmegaConf

        node = (
            OmegaConf.to_container(data_cfg, resolve=True)
            if isinstance(data_cfg, DictConfig)
            else dict(data_cfg)
        )
    except ImportError:  # pragma: no cover
        node = dict(data_cfg)
    kind, node, dm_kwargs = split_config(node)
    cls = {"pairs": PairDataModule, "synthetic": SyntheticDataModule}.get(kind, LMDataModule)
    source = build_source(node)
    return cls(
        source,
        tokenizer,
        block_size=block_size,
        batch_size=batch_size,
        seed=seed,
        num_workers=num_workers,  # type: ignore[arg-type]
        pin_memory=pin_memory,
        rank=rank,
        world_size=world_size,
        **dm_kwargs,
    )
