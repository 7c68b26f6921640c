"""Where evaluation data comes from: local files (plain, .gz, .bz2, .xz; text or JSON
lines) or, when no file is given, a Hugging Face ``datasets`` download (cached after the
first use). Errors say which ``benchmarks.<name>.*`` key to set."""

from __future__ import annotations

import bz2
import contextlib
import gzip
import json
import lzma
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from src.data.sources.base import file_kind
from src.errors import DataError

_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


class CheckedText:
    """A text file being read whose decoding errors name the file: bytes that are not UTF-8, a
    ``.gz`` / ``.bz2`` / ``.xz`` that is not that format or is cut short: a ``DataError`` naming
    the file, never a ``UnicodeDecodeError`` / ``BadGzipFile`` traceback from inside a benchmark."""

    def __init__(self, f: IO[str], path: Path) -> None:
        self._f, self.path = f, path

    @contextlib.contextmanager
    def _named(self) -> Iterator[None]:
        try:
            yield
        except UnicodeDecodeError as e:
            raise DataError(
                f"{self.path}: bytes that are not valid UTF-8 ({e.reason}, byte "
                f"{e.object[e.start : e.end]!r}); convert the file to UTF-8 (e.g. iconv -f latin1 "
                "-t utf-8)"
            ) from None
        except (EOFError, OSError, lzma.LZMAError, zlib.error) as e:
            fmt = self.path.suffix or "text"
            raise DataError(
                f"{self.path}: cannot be read as {fmt} ({type(e).__name__}: {e}); a file named "
                f"{fmt} must hold {fmt} data: recompress it, or name it for what it holds"
            ) from None

    def read(self, n: int = -1) -> str:
        with self._named():
            return self._f.read(n)

    def readline(self) -> str:
        with self._named():
            return self._f.readline()

    def __iter__(self) -> Iterator[str]:
        while line := self.readline():
            yield line

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> CheckedText:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_text(path: str | Path) -> CheckedText:
    """Open a UTF-8 text file, decompressing .gz / .bz2 / .xz transparently; ``DataError`` for a
    path that is missing, a directory, a FIFO or device, or empty, and (while reading) for bytes
    that are not UTF-8 or not the compression the name says (``CheckedText``)."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise DataError(
            f"'{p}' is a directory, not a file; give a text or JSON-lines file (.gz/.bz2/.xz too)"
        )
    if not p.is_file():
        kind = file_kind(p)
        if kind == "no such file":
            raise DataError(f"no such file: '{p}'")
        raise DataError(
            f"'{p}' is {kind}, not a regular file; give a text or JSON-lines file (copy the stream "
            "to one first, e.g. cat <source> > data.txt)"
        )
    if p.stat().st_size == 0:
        raise DataError(f"'{p}' is empty (0 bytes); give a file holding the evaluation data")
    opener = _OPENERS.get(p.suffix)
    f = opener(p, "rt", encoding="utf-8") if opener is not None else open(p, encoding="utf-8")
    return CheckedText(f, p)  # type: ignore[arg-type]


def read_text(path: str | Path) -> str:
    with open_text(path) as f:
        return f.read()


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """JSON objects, one per non-empty line."""
    records = 0
    with open_text(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataError(
                        f"{path}:{n} is not valid JSON ({e.msg}); expected one JSON object per line"
                    ) from None
                if not isinstance(record, dict):
                    raise DataError(
                        f"{path}:{n} holds a JSON {type(record).__name__}; expected one JSON "
                        "object per line"
                    )
                records += 1
                yield record
    if not records:
        raise DataError(
            f"{path} holds no JSON records (only blank lines); give a file with one JSON object "
            "per line"
        )


def looks_like_jsonl(path: str | Path) -> bool:
    """True when the first non-blank character of the file is '{'."""
    with open_text(path) as f:
        for line in f:
            if line.strip():
                return line.lstrip().startswith("{")
    return False


def load_hf_dataset(name: str, config: str | None, split: str, key: str) -> Any:
    """``datasets.load_dataset(name, config, split=split)`` with an actionable error when
    the data is neither cached nor downloadable (e.g. offline)."""
    import datasets

    try:
        return datasets.load_dataset(name, config, split=split)
    except Exception as e:  # ConnectionError, DatasetNotFoundError, offline mode ...
        raise FileNotFoundError(
            f"could not load the Hugging Face dataset '{name}'"
            + (f" ({config})" if config else "")
            + f", split '{split}': {type(e).__name__}: {e}. Offline? Point {key}.path at a local copy of the data "
            f"(see docs/evaluation.md)"
        ) from None


def wikitext_detokenize(text: str) -> str:
    """Undo WikiText's tokenisation (``@-@``, spaced punctuation and brackets), as the
    Megatron / lm-evaluation-harness ``wikitext_detokenizer`` does, so a BPE model sees
    ordinary prose (GPT-2 paper, §3.1: "invertible de-tokenizers")."""
    s = text.replace("s '", "s'")
    s = re.sub(r"/' [0-9]/", r"/'[0-9]/", s)
    for spaced, joined in (
        (" @-@ ", "-"),
        (" @,@ ", ","),
        (" @.@ ", "."),
        (" : ", ": "),
        (" ; ", "; "),
        (" . ", ". "),
        (" ! ", "! "),
        (" ? ", "? "),
        (" , ", ", "),
    ):
        s = s.replace(spaced, joined)
    for pattern, repl in (
        (r"\(\s*([^\)]*?)\s*\)", r"(\1)"),
        (r"\[\s*([^\]]*?)\s*\]", r"[\1]"),
        (r"{\s*([^}]*?)\s*}", r"{\1}"),
        (r"\"\s*([^\"]*?)\s*\"", r'"\1"'),
        (r"'\s*([^']*?)\s*'", r"'\1'"),
    ):
        s = re.sub(pattern, repl, s)
    for spaced, joined in (
        ("= = = =", "===="),
        ("= = =", "==="),
        ("= =", "=="),
        (" \u00b0 ", "\u00b0"),
        (" \n", "\n"),
        ("\n ", "\n"),
        (" N ", " 1 "),
        (" 's", "'s"),
    ):
        s = s.replace(spaced, joined)
    return s


DETOKENIZERS = {"wikitext": wikitext_detokenize}
