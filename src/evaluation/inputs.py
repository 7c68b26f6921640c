"""Where evaluation data comes from: local files (plain, .gz, .bz2, .xz; text or JSON
lines) or, when no file is given, a Hugging Face ``datasets`` download (cached after the
first use). Errors say which ``tasks.<name>.*`` key to set."""
from __future__ import annotations

import bz2
import gzip
import json
import lzma
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from src.errors import DataError

_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def open_text(path: str | Path) -> IO[str]:
    """Open a UTF-8 text file, decompressing .gz / .bz2 / .xz transparently; ``DataError`` for a
    path that is missing or a directory."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise DataError(f"'{p}' is a directory, not a file; give a text or JSON-lines file (.gz/.bz2/.xz too)")
    if not p.is_file():
        raise DataError(f"no such file: '{p}'")
    opener = _OPENERS.get(p.suffix)
    if opener is not None:
        return opener(p, "rt", encoding="utf-8")  # type: ignore[return-value]
    return open(p, encoding="utf-8")


def read_text(path: str | Path) -> str:
    with open_text(path) as f:
        return f.read()


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """JSON objects, one per non-empty line."""
    with open_text(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{n} is not valid JSON ({e.msg}); expected one JSON object per line") from None


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
    for spaced, joined in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."),
                           (" : ", ": "), (" ; ", "; "), (" . ", ". "), (" ! ", "! "), (" ? ", "? "), (" , ", ", ")):
        s = s.replace(spaced, joined)
    for pattern, repl in ((r"\(\s*([^\)]*?)\s*\)", r"(\1)"), (r"\[\s*([^\]]*?)\s*\]", r"[\1]"),
                          (r"{\s*([^}]*?)\s*}", r"{\1}"), (r"\"\s*([^\"]*?)\s*\"", r'"\1"'), (r"'\s*([^']*?)\s*'", r"'\1'")):
        s = re.sub(pattern, repl, s)
    for spaced, joined in (("= = = =", "===="), ("= = =", "==="), ("= =", "=="), (" \u00b0 ", "\u00b0"),
                           (" \n", "\n"), ("\n ", "\n"), (" N ", " 1 "), (" 's", "'s")):
        s = s.replace(spaced, joined)
    return s


DETOKENIZERS = {"wikitext": wikitext_detokenize}
