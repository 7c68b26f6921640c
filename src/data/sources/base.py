"""What a data source is, plus the helpers every source shares (reading, splitting, downloading).

Two kinds of source:

* ``LMSource`` — documents of text per split (``train``, ``val``, ``test``); the datamodule
  tokenizes them once into a cached token stream.
* ``PairSource`` — aligned (source sentence, target sentence) pairs per split, for translation.

Every source has a test split distinct from its validation split: model selection reads val,
verdicts read test (docs/studies.md), so a held-out fraction of 0 for test is refused.

A source only reads; tokenizing, caching and batching live in ``src.data.cache`` and
``src.data.datamodule``.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import stat
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from src.errors import DataError
from src.files import atomic_path

DEFAULT_CACHE_DIR = "~/.cache/transformer-lab"
SPLITS = ("train", "val", "test")
# files up to this size are keyed by content, bigger ones by (size, mtime)
_HASH_CONTENT_LIMIT = 64 * 2**20


class Source:
    """Base of all sources: a name (the registry key), a cache directory and a fingerprint."""

    kind: ClassVar[str] = "base"
    registry_name: ClassVar[str]

    def __init__(self, cache_dir: str | None = None) -> None:
        self.cache_dir = Path(os.path.expanduser(cache_dir or DEFAULT_CACHE_DIR))

    @property
    def name(self) -> str:
        return type(self).registry_name

    def fingerprint(self) -> dict[str, Any]:
        """JSON-able description of the content and configuration (part of the token-cache key)."""
        raise NotImplementedError


class LMSource(Source):
    """Text documents per split, for language modelling."""

    kind: ClassVar[str] = "lm"
    #: put the tokenizer's eos between documents (independent documents); False for one long text
    #: cut in parts
    separate_documents: bool = True

    def splits(self) -> dict[str, Sequence[str]]:
        """``{"train": docs, "val": docs, "test": docs}``."""
        raise NotImplementedError


class PairSource(Source):
    """Aligned sentence pairs per split, for sequence-to-sequence tasks."""

    kind: ClassVar[str] = "pairs"

    def pairs(self) -> dict[str, tuple[list[str], list[str]]]:
        """``{"train": (src_sentences, tgt_sentences), "val": ..., "test": ...}``, aligned by
        index."""
        raise NotImplementedError


# ---------------------------------------------------------------- reading


def decode_bytes(data: bytes, path: str | Path, encoding: str = "utf-8") -> str:
    """Decode, naming the file and byte offset of the first bad byte on failure."""
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        raise DataError(
            f"{path}: bytes at offset {e.start} are not valid {encoding} ({e.reason}); convert the "
            f"file to {encoding} or set data.encoding to its encoding"
        ) from None


def read_text(path: str | Path, encoding: str = "utf-8") -> str:
    """A text file (gzip-compressed if it ends in ``.gz``) decoded strictly."""
    path = Path(path)
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return decode_bytes(data, path, encoding)


def read_lines(path: str | Path, encoding: str = "utf-8") -> list[str]:
    """One sentence per line (trailing newline stripped)."""
    text = read_text(path, encoding)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def file_kind(p: Path) -> str:
    """What is at ``p`` when it is not a regular file, in words (a FIFO would block a reader
    forever)."""
    try:
        mode = p.stat().st_mode
    except OSError:
        return "no such file"
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def require_file(path: str | Path, key: str, fix: str) -> Path:
    p = Path(os.path.expanduser(str(path)))
    if p.is_dir():
        raise DataError(f"data.{key}='{path}' is a directory, not a file; {fix}")
    if not p.is_file():
        kind = file_kind(p)
        if kind != "no such file":  # a FIFO or a device: reading it would block or never end
            raise DataError(
                f"data.{key}='{path}' is {kind}, not a regular file; copy its content to a file "
                f"first. {fix}"
            )
        raise DataError(f"data.{key}='{path}': no such file. {fix}")
    return p


def file_fingerprint(path: str | Path) -> dict[str, Any]:
    """Content hash for files up to 64 MiB, else (size, mtime); plus the resolved path."""
    p = Path(path).resolve()
    st = p.stat()
    fp: dict[str, Any] = {"path": str(p), "size": st.st_size}
    if st.st_size <= _HASH_CONTENT_LIMIT:
        fp["blake2b"] = hashlib.blake2b(p.read_bytes(), digest_size=16).hexdigest()
    else:
        fp["mtime_ns"] = st.st_mtime_ns
    return fp


# ---------------------------------------------------------------- splitting


def check_fractions(**fractions: float) -> None:
    """Each fraction in [0, 1), their sum below 1, and ``test_fraction`` (when given) above 0."""
    for key, value in fractions.items():
        if not 0.0 <= float(value) < 1.0:
            raise DataError(
                f"data.{key}={value} must be in [0, 1) and the held-out fractions must sum below 1"
            )
    if "test_fraction" in fractions and float(fractions["test_fraction"]) <= 0.0:
        raise DataError(
            f"data.test_fraction={fractions['test_fraction']!r} is invalid: every source needs a "
            "test split distinct from val (verdicts read test, selection reads val); use e.g. 0.05"
        )
    if sum(fractions.values()) >= 1.0:
        raise DataError(
            f"data.{' + '.join(fractions)}={sum(fractions.values())} must be in [0, 1) and the "
            "held-out fractions must sum below 1"
        )


def cut_documents(docs: Sequence[str], fractions: Sequence[float]) -> list[list[str]]:
    """Cut the concatenation of ``docs`` by characters into consecutive parts: the last
    ``fractions[-1]`` of the characters, before it ``fractions[-2]``, …, and the rest first
    (nanoGPT's ``data[:int(n*0.9)]``). A document that straddles a cut is split there."""
    n = sum(map(len, docs))
    cuts, edge = [], 1.0
    for f in reversed(fractions):
        edge -= f
        cuts.append(int(n * edge))
    cuts = [*reversed(cuts), n]  # end of each part
    parts: list[list[str]] = [[] for _ in cuts]
    seen, part = 0, 0
    for d in docs:
        at = 0
        while at < len(d):
            room = cuts[part] - (seen + at)
            if room <= 0:
                part += 1
                continue
            piece = d[at : at + room]
            parts[part].append(piece)
            at += len(piece)
        seen += len(d)
    return parts


def split_text(text: str, val_fraction: float, test_fraction: float) -> dict[str, list[str]]:
    """Cut one text by characters: the first part trains, then val, then test."""
    train, val, test = cut_documents([text], [val_fraction, test_fraction])
    return {"train": train, "val": val, "test": test}


def split_documents(
    docs: Sequence[tuple[str, str]], val_fraction: float, test_fraction: float
) -> dict[str, list[str]]:
    """Assign whole documents ``(key, text)`` to splits by a stable hash of their key, so
    the split never depends on the order, the platform or Python's hash seed."""
    out: dict[str, list[str]] = {"train": [], "val": [], "test": []}
    for key, text in docs:
        u = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big") / 2.0**64
        split = (
            "val" if u < val_fraction else "test" if u < val_fraction + test_fraction else "train"
        )
        out[split].append(text)
    return out


# ---------------------------------------------------------------- downloading


def download(
    url: str, dest: Path, *, what: str, key: str, sha256: str | None = None, timeout: float = 30.0
) -> Path:
    """Fetch ``url`` to ``dest`` (atomically); on failure say where to put the file instead."""
    with atomic_path(dest, suffix=".part") as tmp:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r, open(tmp, "wb") as f:
                while chunk := r.read(1 << 20):
                    f.write(chunk)
        except OSError as e:  # URLError, timeouts, refused connections, DNS failures
            raise DataError(
                f"could not download {what} from {url} ({getattr(e, 'reason', e)}). Put the file "
                f"at {dest} or pass data.{key}=/path/to/{dest.name}; without internet, "
                "data=embedded works offline"
            ) from None
        if sha256 is not None:
            actual = hashlib.sha256(tmp.read_bytes()).hexdigest()
            if actual != sha256:
                raise DataError(
                    f"{url}: sha256 {actual} does not match the expected {sha256} for {what}; "
                    f"delete the file and retry, or pass data.{key}= a good copy"
                )
    return dest
