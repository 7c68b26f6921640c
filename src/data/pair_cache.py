"""The pair cache (translation): sentence pairs tokenized once into ragged arrays, ``{split}.npz``
with ``src``/``tgt`` flat token ids and ``src_offsets``/``tgt_offsets`` (int64, length n+1), next
to the ``meta.json`` that ``src.data.cache`` reads."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from src.data.cache import CACHE_VERSION, _empty_split, fit_if_needed, token_dtype, write_meta
from src.data.sources.base import SPLITS
from src.data.tokenizers import Tokenizer
from src.files import atomic_path


class Ragged:
    """Variable-length token sequences stored flat: sequence i is
    ``tokens[offsets[i]:offsets[i+1]]``."""

    def __init__(self, tokens: np.ndarray, offsets: np.ndarray) -> None:
        self.tokens, self.offsets = tokens, offsets

    @classmethod
    def from_lists(cls, seqs: Sequence[Sequence[int]], dtype: np.dtype) -> Ragged:
        lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.fromiter((t for s in seqs for t in s), dtype=dtype, count=int(offsets[-1]))
        return cls(flat, offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


def write_pair_dir(
    pairs: Mapping[str, tuple[list[str], list[str]]],
    tokenizer: Tokenizer,
    out_dir: Path,
    *,
    source: str,
    fingerprint: Any = None,
    num_threads: int | None = None,
) -> dict[str, Any]:
    """Tokenize each split's source and target sentences into ``{split}.npz`` (ragged arrays)."""
    for split in SPLITS:
        if split not in pairs or not pairs[split][0]:
            raise _empty_split(source, split, "no sentence pairs")
    fit_if_needed(tokenizer, {s: list(src) + list(tgt) for s, (src, tgt) in pairs.items()}, source)
    out_dir.mkdir(parents=True, exist_ok=True)
    dtype = token_dtype(tokenizer.vocab_size)
    threads = num_threads or os.cpu_count() or 1
    counts = {}
    for split, (src, tgt) in pairs.items():
        arrays = {}
        for side, sents in (("src", src), ("tgt", tgt)):
            r = Ragged.from_lists(tokenizer.encode_batch(list(sents), num_threads=threads), dtype)
            arrays[side], arrays[f"{side}_offsets"] = r.tokens, r.offsets
        dest = out_dir / f"{split}.npz"
        with atomic_path(dest, suffix=".npz") as tmp:
            np.savez(tmp, **arrays)
        counts[split] = len(src)
    meta = {
        "version": CACHE_VERSION,
        "dtype": dtype.name,
        "vocab_size": tokenizer.vocab_size,
        "tokenizer": tokenizer.state_dict(),
        "source": source,
        "fingerprint": fingerprint,
        "pairs": counts,
    }
    write_meta(out_dir, meta)
    return meta


def open_pairs(out_dir: Path, split: str) -> tuple[Ragged, Ragged]:
    with np.load(Path(out_dir) / f"{split}.npz") as z:
        return Ragged(z["src"], z["src_offsets"]), Ragged(z["tgt"], z["tgt_offsets"])
