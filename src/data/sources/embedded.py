"""A corpus that needs no download: the help texts shipped with Python itself.

``pydoc_data.topics.topics`` is a dict of ~80 documentation topics (about 0.47 M
characters for Python 3.11; ~110 k GPT-2 tokens) that ``help('assert')`` prints. It is in
every CPython install, so ``data=embedded`` runs on a fresh offline machine. Topics are
cut at paragraph breaks into pieces of about ``piece_chars`` characters (topics vary from
a few hundred to 60 k characters), and each piece is assigned to train/val/test by a
stable hash of ``topic/index``, so the split is deterministic and close to the fractions.
The text differs slightly between Python versions; the cache key includes its hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from src.data.sources import SOURCES
from src.data.sources.base import LMSource, check_fractions, split_documents


def topics() -> dict[str, str]:
    """Topic name -> help text (sorted by name)."""
    from pydoc_data.topics import topics as t

    return {k: t[k] for k in sorted(t)}


def pieces(piece_chars: int) -> list[tuple[str, str]]:
    """``(topic/index, text)`` pieces of at least ``piece_chars`` characters, cut at blank lines."""
    out: list[tuple[str, str]] = []
    for name, text in topics().items():
        buf: list[str] = []
        for para in text.split("\n\n"):
            buf.append(para)
            if sum(map(len, buf)) >= piece_chars:
                out.append((f"{name}/{len(out)}", "\n\n".join(buf) + "\n\n"))
                buf = []
        if buf:
            out.append((f"{name}/{len(out)}", "\n\n".join(buf) + "\n\n"))
    return out


@SOURCES.register("embedded")
class Embedded(LMSource):
    """Python's bundled documentation topics, one document per piece of a topic."""

    def __init__(
        self,
        cache_dir: str | None = None,
        val_fraction: float = 0.1,
        test_fraction: float = 0.1,
        piece_chars: int = 4000,
    ) -> None:
        super().__init__(cache_dir)
        check_fractions(val_fraction=val_fraction, test_fraction=test_fraction)
        self.val_fraction, self.test_fraction, self.piece_chars = (
            val_fraction,
            test_fraction,
            piece_chars,
        )

    def fingerprint(self) -> dict[str, Any]:
        digest = hashlib.blake2b(json.dumps(topics()).encode(), digest_size=16).hexdigest()
        return {
            "topics": digest,
            "val": self.val_fraction,
            "test": self.test_fraction,
            "piece_chars": self.piece_chars,
        }

    def splits(self) -> dict[str, Sequence[str]]:
        return split_documents(pieces(self.piece_chars), self.val_fraction, self.test_fraction)
