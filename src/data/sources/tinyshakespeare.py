"""Tiny Shakespeare: the char-rnn ``input.txt`` (1,115,394 characters, 65 distinct).

Split by characters: the first 90% trains, as in nanoGPT; nanoGPT's last 10% is cut into
validation (5%, 55,770 characters) and test (the last 5%, 55,770 characters), so selection
and verdicts never read the same text and the training text stays nanoGPT's.

``val_text=nanogpt`` validates on nanoGPT's own validation text instead: the whole last 10%
(``data[int(n*0.9):]`` of nanoGPT's ``data/shakespeare_char/prepare.py``, 111,540 characters), so a
loss is read on the text nanoGPT reports its loss on (the speedrun against nanoGPT,
``experiment=shakespeare_char_speedrun``). No text is left for a distinct test split: the test split
then holds the same text as val, and a run must set ``test=false`` (``check_test_split`` refuses
``test=true``, since a verdict on test would be a verdict on the text that selected the model)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from src.data.sources import SOURCES
from src.data.sources.base import (
    LMSource,
    check_fractions,
    download,
    file_fingerprint,
    read_text,
    require_file,
    split_text,
)
from src.errors import DataError, did_you_mean

#: where validation text comes from: our 5% after the training text, or nanoGPT's last 10%
VAL_TEXTS = ("ours", "nanogpt")
NANOGPT_TRAIN_FRACTION = (
    0.9  # nanoGPT's prepare.py: train_data = data[:int(n*0.9)], val_data = the rest
)
URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"


@SOURCES.register("tinyshakespeare")
class TinyShakespeare(LMSource):
    """``path``: a local ``input.txt``; else ``<cache_dir>/tinyshakespeare/input.txt``, downloaded
    once."""

    separate_documents = False  # one text cut in parts

    def __init__(
        self,
        path: str | None = None,
        cache_dir: str | None = None,
        url: str = URL,
        val_fraction: float = 0.05,
        test_fraction: float = 0.05,
        val_text: str = "ours",
    ) -> None:
        super().__init__(cache_dir)
        check_fractions(val_fraction=val_fraction, test_fraction=test_fraction)
        _check_val_text(val_text)
        self.path, self.url = path, url
        self.val_fraction, self.test_fraction = val_fraction, test_fraction
        self.val_text = val_text
        self._file: Path | None = None

    def file(self) -> Path:
        """The local ``input.txt``, downloading it into the cache on first use."""
        if self._file is None:
            if self.path is not None:
                self._file = require_file(
                    self.path,
                    "path",
                    "give the char-rnn input.txt, or leave data.path unset to download it",
                )
            else:
                dest = self.cache_dir / "tinyshakespeare" / "input.txt"
                expected = SHA256 if self.url == URL else None
                self._file = (
                    dest
                    if dest.is_file()
                    else download(
                        self.url, dest, what="tinyshakespeare", key="path", sha256=expected
                    )
                )
        return self._file

    def fingerprint(self) -> dict[str, Any]:
        fp = {
            "file": file_fingerprint(self.file()),
            "val": self.val_fraction,
            "test": self.test_fraction,
        }
        if self.val_text != "ours":  # token caches written before the option keep their fingerprint
            fp["val_text"] = self.val_text
        return fp

    def splits(self) -> dict[str, Sequence[str]]:
        text = read_text(self.file())
        if self.val_text == "nanogpt":
            cut = int(len(text) * NANOGPT_TRAIN_FRACTION)
            return {
                "train": [text[:cut]],
                "val": [text[cut:]],
                "test": [text[cut:]],
            }  # test = val: test=false only
        return split_text(text, self.val_fraction, self.test_fraction)

    @staticmethod
    def check_test_split(args: Mapping[str, Any], *, test: bool) -> None:
        """``val_text=nanogpt`` leaves no text for a test split distinct from val: refuse
        ``test=true``."""
        val_text = args.get("val_text", "ours")
        _check_val_text(val_text)
        if val_text == "nanogpt" and test:
            raise DataError(
                "data.val_text=nanogpt validates on nanoGPT's last 10% of input.txt, which leaves "
                "no text for a test split distinct from val, so test=true would report a verdict "
                "on the text that chose the model; set test=false, or data.val_text=ours (val 5%, "
                "test 5%)"
            )


def _check_val_text(value: Any) -> None:
    if value not in VAL_TEXTS:
        raise DataError(
            f"data.val_text={value!r} is "
            f"invalid{did_you_mean(str(value), VAL_TEXTS, 'data.val_text=')}; use ours (the 5% "
            "after the training text; test the last 5%) or nanogpt (nanoGPT's last 10%, "
            "test=false)"
        )
