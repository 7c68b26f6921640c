"""Token ids of a prepared ``.bin`` / token cache checked against the vocabulary before training.

An id at or beyond the model's vocabulary (a ``.bin`` written with another tokenizer, a file
written as uint32 and read as uint16, a corrupt block deep in a large file) would otherwise be
found only by the embedding lookup of the batch that happens to hold it, possibly hours into a
run. ``check_token_ids`` reads the whole array once when the data module sets up: through the
memory map, in chunks of ``CHUNK_TOKENS`` (bounded memory whatever the file size; numpy's
``max`` over each chunk), and only on failure a second pass over the chunk that failed to find
the first offending position. Cost measured on a 1 GB uint16 file: docs/reliability.md.

The maximum of a file is remembered per process (path, size, modification time), so the
``setup`` calls of fit, validate and test read it once.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import numpy as np

from src.errors import DataError

CHUNK_TOKENS = 1 << 25  # 32 Mi tokens: 64 MiB of uint16 per read


def _chunks(array: np.ndarray) -> range:
    return range(0, len(array), CHUNK_TOKENS)


def scan_max(array: np.ndarray) -> int:
    """The largest id in ``array`` (-1 when empty), chunk by chunk."""
    best = -1
    for start in _chunks(array):
        best = max(best, int(array[start : start + CHUNK_TOKENS].max()))
    return best


@lru_cache(maxsize=64)
def _file_max(path: str, size: int, mtime_ns: int, dtype: str) -> int:
    return scan_max(np.memmap(path, dtype=np.dtype(dtype), mode="r"))


def max_token_id(array: np.ndarray) -> int:
    """``scan_max``; for a memory-mapped file, remembered until the file changes."""
    path = getattr(array, "filename", None)
    if path is not None and len(array):
        st = os.stat(path)
        if st.st_size == len(array) * array.dtype.itemsize:  # the map covers the whole file
            return _file_max(str(path), st.st_size, st.st_mtime_ns, array.dtype.str)
    return scan_max(array) if len(array) else -1


def first_at_or_above(array: np.ndarray, limit: int) -> int:
    """Index of the first id >= ``limit`` (-1 if none)."""
    for start in _chunks(array):
        hits = np.flatnonzero(array[start : start + CHUNK_TOKENS] >= limit)
        if hits.size:
            return start + int(hits[0])
    return -1


def check_token_ids(
    array: np.ndarray, vocab_size: int, *, where: str | os.PathLike[str], bound: str
) -> None:
    """Raise ``DataError`` (naming the file, the id and its position) if an id of ``array`` is >=
    ``vocab_size``.

    where: the file (or file and array name) the ids come from; bound: what ``vocab_size`` is
    (``model.vocab_size=50257``), both for the message.
    """
    if max_token_id(array) < vocab_size:
        return
    index = first_at_or_above(array, vocab_size)
    raise DataError(
        f"{Path(where)}: token id {int(array[index])} at position {index} (byte offset "
        f"{index * array.dtype.itemsize}, {array.dtype.name}) is outside the vocabulary ({bound}); "
        "the file was written with another tokenizer, or is damaged. Prepare it again with this "
        "run's tokenizer (python -m src.prepare data=<name> tokenizer=<name>), or train with the "
        "tokenizer it was written with"
    )
