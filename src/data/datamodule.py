"""Lightning datamodules: ``LMDataModule`` (text -> token windows) and ``PairDataModule``
(sentence pairs -> padded batches); ``datamodule_for`` picks one by the source's kind, and
``build_datamodule`` does so from a plain ``data`` node.

Order of calls (``src.training.setup.build_run``)::

    dm = datamodule_for(spec.data.kind, source, tokenizer, block_size=..., batch_size=..., ...)
    dm.prepare_tokenizer()        # fits a char vocabulary on the corpus (cached); no-op for gpt2/hf
    spec = resolve(spec, tokenizer).spec   # model.vocab_size from the (fitted) tokenizer
    task = OBJECTIVES.get(name)(spec.to_dict(), tokenizer.state_dict(), model_config=spec.model, ...)
    trainer.fit(task, datamodule=dm, ckpt_path=...)   # prepare_data -> setup -> loaders

Batches follow docs/CONTRACTS.md. Training batches are functions of (seed, rank, batch
index) (``src.data.batches``); the train loader is stateful, so Lightning's checkpoint
carries its position and ``fit(ckpt_path=...)`` resumes on the exact next batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch.utils.data import DataLoader

from src.data.batches import FixedWindows, RandomWindows, ResumableLoader
from src.data.cache import open_tokens, write_token_dir
from src.data.datamodule_base import _BaseDataModule
from src.data.pair_cache import open_pairs, write_pair_dir
from src.data.pairs import PairEvalBatches, PairTrainBatches
from src.data.sources import build_source, split_config
from src.data.sources.base import LMSource, PairSource, Source
from src.data.sources.openwebtext import BinDir
from src.data.synthetic.datamodule import SyntheticDataModule
from src.data.tokenizers import Tokenizer
from src.errors import DataError


@dataclass
class ReferenceCorpus:
    """Token sequences of the training split for reference models (``src.evaluation.ngram``);
    ``start``: each sequence is scored from its first token, after a start symbol."""

    sequences: list[np.ndarray]
    start: bool


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
        # a prepared directory from before test splits (sources always make one)
        if "test" not in self.tokens:
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
    return datamodule_for(
        kind,
        build_source(node),
        tokenizer,
        block_size=block_size,
        batch_size=batch_size,
        seed=seed,
        num_workers=num_workers,
        pin_memory=pin_memory,
        rank=rank,
        world_size=world_size,
        **dm_kwargs,
    )


def datamodule_for(
    kind: str,
    source: Source,
    tokenizer: Tokenizer,
    *,
    block_size: int,
    batch_size: int,
    seed: int,
    num_workers: int = 0,
    pin_memory: bool = False,
    rank: int | None = None,
    world_size: int | None = None,
    **loader: Any,
) -> LMDataModule | PairDataModule | SyntheticDataModule:
    """The datamodule of a built source's ``kind`` ("text", "pairs", "synthetic"); ``loader``:
    the datamodule's own keys (``src.data.sources.DATAMODULE_KEYS``), checked by the caller."""
    cls = {"pairs": PairDataModule, "synthetic": SyntheticDataModule}.get(kind, LMDataModule)
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
        **loader,
    )
