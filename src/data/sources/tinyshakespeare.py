"""Tiny Shakespeare: the char-rnn ``input.txt`` (1,115,394 characters, 65 distinct).

Split by characters: the first 90% trains, as in nanoGPT; nanoGPT's last 10% is cut into
validation (5%, 55,770 characters) and test (the last 5%, 55,770 characters), so selection
and verdicts never read the same text and the training text stays nanoGPT's.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from src.data.sources import SOURCES
from src.data.sources.base import LMSource, check_fractions, download, file_fingerprint, read_text, require_file, split_text

URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"


@SOURCES.register("tinyshakespeare")
class TinyShakespeare(LMSource):
    """``path``: a local ``input.txt``; else ``<cache_dir>/tinyshakespeare/input.txt``, downloaded once."""

    separate_documents = False  # one text cut in parts

    def __init__(
        self,
        path: str | None = None,
        cache_dir: str | None = None,
        url: str = URL,
        val_fraction: float = 0.05,
        test_fraction: float = 0.05,
    ) -> None:
        super().__init__(cache_dir)
        check_fractions(val_fraction=val_fraction, test_fraction=test_fraction)
        self.path, self.url = path, url
        self.val_fraction, self.test_fraction = val_fraction, test_fraction
        self._file: Path | None = None

    def file(self) -> Path:
        """The local ``input.txt``, downloading it into the cache on first use."""
        if self._file is None:
            if self.path is not None:
                self._file = require_file(self.path, "path", "give the char-rnn input.txt, or leave data.path unset to download it")
            else:
                dest = self.cache_dir / "tinyshakespeare" / "input.txt"
                expected = SHA256 if self.url == URL else None
                self._file = dest if dest.is_file() else download(self.url, dest, what="tinyshakespeare", key="path", sha256=expected)
        return self._file

    def fingerprint(self) -> dict[str, Any]:
        return {"file": file_fingerprint(self.file()), "val": self.val_fraction, "test": self.test_fraction}

    def splits(self) -> dict[str, Sequence[str]]:
        return split_text(read_text(self.file()), self.val_fraction, self.test_fraction)
