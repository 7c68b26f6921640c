"""Any Hugging Face ``datasets`` dataset: ``datasets.load_dataset`` with its own caching.

``path`` is a hub name (``wikitext``) or a builder (``text``, ``json``, ``parquet``…) with
``data_files``; ``config`` its configuration name; ``splits`` maps our split names to the
dataset's (``val: validation``). Without a val split, ``val_fraction`` of train is held
out (``train_test_split`` with ``seed``); without a test split, ``test_fraction`` of what
remains (with ``seed + 1``), so val and test are always distinct. ``streaming: true`` never
downloads the whole dataset: the stream is read once and tokenized into our cache
(``max_documents`` caps it); without those splits the first ``streaming_val_documents`` rows
validate and the next ``streaming_test_documents`` test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from src.data.sources import SOURCES
from src.data.sources.base import LMSource, check_fractions
from src.errors import DataError
from src.plain import to_plain


@SOURCES.register("hf")
class HFDataset(LMSource):
    """Documents are the rows' ``text_column``; each document ends with the tokenizer's eos."""

    def __init__(
        self,
        path: str = "",
        config: str | None = None,
        data_files: Any = None,
        splits: Mapping[str, str | None] | None = None,
        text_column: str = "text",
        val_fraction: float = 0.0005,
        test_fraction: float = 0.0005,
        seed: int = 2357,
        streaming: bool = False,
        streaming_val_documents: int = 1000,
        streaming_test_documents: int = 1000,
        max_documents: int | None = None,
        revision: str | None = None,
        builder_kwargs: Mapping[str, Any] | None = None,
        separate_documents: bool = True,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__(cache_dir)
        if not path:
            raise DataError(
                f"data.path={path!r} is invalid: give a dataset name or builder, e.g. "
                "data.path=wikitext"
            )
        self.path, self.config, self.data_files, self.revision = path, config, data_files, revision
        self.split_names = (
            dict(splits)
            if splits is not None
            else {"train": "train", "val": "validation", "test": "test"}
        )
        self.text_column, self.val_fraction, self.test_fraction, self.seed = (
            text_column,
            val_fraction,
            test_fraction,
            seed,
        )
        self.streaming, self.streaming_val_documents, self.max_documents = (
            streaming,
            streaming_val_documents,
            max_documents,
        )
        self.streaming_test_documents = streaming_test_documents
        self.builder_kwargs = dict(builder_kwargs or {})
        self.separate_documents = separate_documents
        held_out = {
            f"{k}_fraction": v
            for k, v in (("val", val_fraction), ("test", test_fraction))
            if not self.split_names.get(k)
        }
        if held_out and not streaming:
            check_fractions(**held_out)
        self._loaded: dict[str, Any] | None = None

    def _load(self) -> dict[str, Any]:
        if self._loaded is not None:
            return self._loaded
        import datasets

        try:
            dd = datasets.load_dataset(
                self.path,
                self.config,
                data_files=to_plain(self.data_files),
                revision=self.revision,
                streaming=self.streaming,
                **self.builder_kwargs,
            )
        except Exception as e:  # the loader's own errors vary by version; report them with the fix
            raise DataError(
                f"datasets.load_dataset('{self.path}', {self.config!r}) failed: "
                f"{type(e).__name__}: {e}. Offline, pass a local builder and files (data.path=text "
                "data.data_files=...), or a dataset already in the datasets cache; without "
                "internet, data=embedded works"
            ) from None
        out: dict[str, Any] = {}
        for ours, theirs in self.split_names.items():
            if theirs and theirs in dd:
                out[ours] = dd[theirs]
        if "train" not in out:
            raise DataError(
                f"data.splits={self.split_names!r} is invalid: the dataset's splits are {list(dd)}"
            )
        for split, fraction, n, seed in (
            ("val", self.val_fraction, self.streaming_val_documents, self.seed),
            ("test", self.test_fraction, self.streaming_test_documents, self.seed + 1),
        ):
            if split in out:
                continue
            if self.streaming:  # the first rows of the stream: val, then test
                out[split], out["train"] = out["train"].take(n), out["train"].skip(n)
            else:
                parts = out["train"].train_test_split(test_size=fraction, seed=seed, shuffle=True)
                out["train"], out[split] = parts["train"], parts["test"]
        for split, ds in out.items():
            columns = ds.column_names  # None for a stream whose features are unknown until read
            if columns is not None and self.text_column not in columns:
                raise DataError(
                    f"data.text_column='{self.text_column}' is not a column of {self.path} split "
                    f"'{split}'; its columns are {list(columns)}"
                )
            ds = ds.select_columns([self.text_column])
            if self.text_column != "text":
                ds = ds.rename_column(self.text_column, "text")
            if self.max_documents is not None:
                ds = ds.take(self.max_documents)
            out[split] = ds
        self._loaded = out
        return out

    def fingerprint(self) -> dict[str, Any]:
        fp: dict[str, Any] = {
            "path": self.path,
            "config": self.config,
            "data_files": to_plain(self.data_files),
            "splits": self.split_names,
            "column": self.text_column,
            "val_fraction": self.val_fraction,
            "test_fraction": self.test_fraction,
            "seed": self.seed,
            "revision": self.revision,
            "streaming": self.streaming,
            "max_documents": self.max_documents,
            "builder_kwargs": to_plain(self.builder_kwargs),
            "separate": self.separate_documents,
        }
        if not self.streaming:  # datasets' own content fingerprint of each split
            fp["datasets"] = {
                k: getattr(ds, "_fingerprint", None) for k, ds in self._load().items()
            }
        return fp

    def splits(self) -> dict[str, Sequence[str]]:
        """``datasets.Dataset`` (or ``IterableDataset`` when streaming) per split, one ``text``
        column."""
        return self._load()
