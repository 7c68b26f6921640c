"""Your own text: ``data=text data.path=<file>``, or ``data.paths=[…]`` for several files, globs or
directories (every ``*.txt`` / ``*.jsonl`` in one). A text file (``.gz`` decompressed) is one
document; a ``.jsonl`` file holds one document per line, in its ``text_field`` (``text``).

Validation comes from ``val_paths`` and test from ``test_paths`` when given; a split without
files is cut off the end of the training text by characters (across the concatenated files, in
order): ``[train | val_fraction | test_fraction]``, so val and test are always distinct.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from src.data.sources import SOURCES
from src.data.sources.base import (
    LMSource,
    check_fractions,
    cut_documents,
    file_fingerprint,
    file_kind,
    read_text,
)
from src.errors import DataError

#: the files a directory given as data.path(s) contributes
TEXT_SUFFIXES = (".txt", ".txt.gz", ".jsonl", ".jsonl.gz")


def expand(patterns: Sequence[str] | str, key: str) -> list[Path]:
    """Files matching ``patterns`` (sorted within each glob, globs in the given order)."""
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [str(patterns)]
    files: list[Path] = []
    for pattern in patterns:
        pattern = os.path.expanduser(str(pattern))
        if glob.has_magic(pattern):
            files += [
                Path(p) for p in sorted(glob.glob(pattern, recursive=True)) if os.path.isfile(p)
            ]
        elif os.path.isfile(pattern):
            files.append(Path(pattern))
        elif os.path.isdir(pattern):  # every text and JSON-lines file in it, in name order
            found = sorted(
                p for p in Path(pattern).iterdir() if p.is_file() and p.name.endswith(TEXT_SUFFIXES)
            )
            if not found:
                raise DataError(
                    f"data.{key}='{pattern}' is a directory with no {'/'.join(TEXT_SUFFIXES)} "
                    "file; give the files in it, or a glob: "
                    f"data.{key}=['{pattern.rstrip('/')}/**/*.txt']"
                )
            files += found
        elif os.path.exists(pattern):  # a FIFO or a device: reading it would block or never end
            raise DataError(
                f"data.{key}='{pattern}' is {file_kind(Path(pattern))}, not a regular file; copy "
                f"its content to a text file first and give that in data.{key}"
            )
        else:
            raise DataError(
                f"data.{key}='{pattern}': no such file. give existing text files or globs in "
                f"data.{key}"
            )
    if not files:
        raise DataError(
            f"data.{key}={list(patterns)} matches no files; give existing text files or globs, "
            f"e.g. data.{key}=[notes/*.txt]"
        )
    return files


@SOURCES.register("text")
class TextFiles(LMSource):
    """Local UTF-8 (or ``encoding``) text files; ``.gz`` files are decompressed."""

    def __init__(
        self,
        path: str | None = None,
        paths: Sequence[str] | str | None = None,
        val_paths: Sequence[str] | str | None = None,
        test_paths: Sequence[str] | str | None = None,
        val_fraction: float = 0.1,
        test_fraction: float = 0.1,
        encoding: str = "utf-8",
        text_field: str = "text",
        cache_dir: str | None = None,
    ) -> None:
        super().__init__(cache_dir)
        if (path is None) == (not paths):
            raise DataError(
                "data=text needs your text: data.path=<file or directory> for one, or "
                "'data.paths=[a.txt,b.txt]' (files, globs, directories) for several"
                + (", not both" if path is not None else "")
            )
        self.files = expand(path, "path") if path is not None else expand(paths, "paths")  # type: ignore[arg-type]
        self.text_field = text_field
        self.val_files = expand(val_paths, "val_paths") if val_paths else None
        self.test_files = expand(test_paths, "test_paths") if test_paths else None
        held_out = {
            k: v
            for k, v, files in (
                ("val_fraction", val_fraction, self.val_files),
                ("test_fraction", test_fraction, self.test_files),
            )
            if files is None
        }
        if held_out:
            check_fractions(**held_out)
        self.val_fraction, self.test_fraction, self.encoding = val_fraction, test_fraction, encoding

    def fingerprint(self) -> dict[str, Any]:
        fp = lambda fs: None if fs is None else [file_fingerprint(f) for f in fs]  # noqa: E731
        return {
            "train": fp(self.files),
            "val": fp(self.val_files),
            "test": fp(self.test_files),
            "val_fraction": None if self.val_files else self.val_fraction,
            "test_fraction": None if self.test_files else self.test_fraction,
            "encoding": self.encoding,
            "text_field": self.text_field,
        }

    def _read(self, files: list[Path]) -> list[str]:
        docs: list[str] = []
        for f in files:
            if f.name.endswith((".jsonl", ".jsonl.gz")):
                docs += self._jsonl(f)
            else:
                docs.append(read_text(f, self.encoding))
        return docs

    def _jsonl(self, f: Path) -> list[str]:
        """One document per line: the line's JSON object's ``text_field``."""
        docs = []
        for n, line in enumerate(read_text(f, self.encoding).splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as e:
                raise DataError(
                    f"{f}:{n} is not a JSON object ({e.msg}); a .jsonl file holds one JSON object "
                    "per line"
                ) from None
            value = record.get(self.text_field) if isinstance(record, dict) else None
            if not isinstance(value, str):
                keys = (
                    ", ".join(map(str, record))
                    if isinstance(record, dict)
                    else type(record).__name__
                )
                raise DataError(
                    f"{f}:{n} has no text in data.text_field='{self.text_field}' (its keys: "
                    f"{keys}); set data.text_field to the field that holds the text"
                )
            docs.append(value)
        return docs

    def splits(self) -> dict[str, Sequence[str]]:
        docs = self._read(self.files)
        cut = [
            ("val", self.val_fraction) if self.val_files is None else None,
            ("test", self.test_fraction) if self.test_files is None else None,
        ]
        held = [c for c in cut if c is not None]
        parts = cut_documents(docs, [f for _, f in held]) if held else [docs]
        out: dict[str, Sequence[str]] = {
            "train": parts[0],
            **{name: part for (name, _), part in zip(held, parts[1:])},
        }
        if self.val_files is not None:
            out["val"] = self._read(self.val_files)
        if self.test_files is not None:
            out["test"] = self._read(self.test_files)
        return out
