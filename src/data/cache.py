"""Tokenize once, cache on disk, read back through ``np.memmap``.

Layout of a token directory (the token cache and ``python -m src.prepare`` both write it;
it is nanoGPT's ``train.bin``/``val.bin`` format plus a ``meta.json``)::

    <dir>/train.bin  val.bin  [test.bin]   flat token ids, uint16 (uint32 if vocab_size > 65535)
    <dir>/meta.json                        {"dtype", "vocab_size", "tokenizer": state, "tokens": {split: n}, ...}

Cached directories live at ``<cache_dir>/tokens/<source>-<key>/`` where ``key`` hashes the
source's fingerprint (file contents or dataset fingerprint, and its split settings) and the
tokenizer's state. ``meta.json`` is written last, so a directory without it is incomplete
and rebuilt; every file is written under a temporary name and renamed into place, so
concurrent writers (several ranks) never see half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from src.data.sources.base import SPLITS
from src.data.tokenizers import Tokenizer, tokenizer_from_state
from src.errors import DataError
from src.files import atomic_path, atomic_write

CACHE_VERSION = 1
_CHUNK_DOCS = 256  # documents per encode_batch call
_PROGRESS_MIN_CHARS = 4_000_000  # show a progress bar above this much text


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 holds ids of vocabularies up to 65,535 (GPT-2's 50,257); larger ones need uint32."""
    return np.dtype(np.uint16 if vocab_size <= 65535 else np.uint32)


def cache_key(*parts: Any) -> str:
    """16 hex digits of blake2b over the JSON of ``parts`` (sorted keys)."""
    blob = json.dumps([CACHE_VERSION, *parts], sort_keys=True, default=str).encode()
    return hashlib.blake2b(blob, digest_size=8).hexdigest()


def token_dir_for(source: Any, tokenizer: Tokenizer) -> Path:
    """``<cache_dir>/tokens/<source>-<key>``: the key hashes the source's fingerprint and the
    tokenizer's state *before* any fitting (a fitted char vocabulary is a function of the
    corpus, so every rank and every rerun finds the same entry)."""
    key = cache_key(
        source.name,
        source.fingerprint(),
        getattr(source, "separate_documents", None),
        tokenizer.state_dict(),
    )
    return Path(source.cache_dir) / "tokens" / f"{source.name}-{key}"


def write_meta(out_dir: Path, meta: Mapping[str, Any]) -> None:
    atomic_write(out_dir / "meta.json", json.dumps(meta, indent=1, sort_keys=True))


#: dtypes a token file may hold (``token_dtype``)
TOKEN_DTYPES = ("uint16", "uint32")


def _damaged_meta(p: Path, what: str) -> DataError:
    return DataError(
        f"{p}: {what}; the prepared directory is damaged or was written by something else. Prepare "
        f"it again (python -m src.prepare ... overwrite=true), or delete {p.parent} (a token cache "
        "entry is rebuilt on the next run)"
    )


def read_meta(out_dir: Path) -> dict[str, Any] | None:
    """``meta.json`` of a token directory, checked; None when there is none (not prepared yet). A
    file that is empty, torn, not a JSON object, or whose ``dtype``/``tokens``/``tokenizer`` cannot
    be right is a ``DataError`` naming it, not a raw ``JSONDecodeError`` or ``KeyError``."""
    p = Path(out_dir) / "meta.json"
    if not p.exists():
        return None
    if not p.is_file():
        raise _damaged_meta(p, "is not a regular file")
    try:
        meta = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise _damaged_meta(p, f"cannot be read as JSON ({type(e).__name__}: {e})") from None
    if not isinstance(meta, dict):
        raise _damaged_meta(p, f"holds a JSON {type(meta).__name__}, not an object")
    if "pairs" in meta:  # a translation cache (write_pair_dir): its arrays are checked by np.load
        return meta
    if str(meta.get("dtype")) not in TOKEN_DTYPES:
        raise _damaged_meta(
            p, f"dtype={meta.get('dtype')!r} is not a token dtype ({' or '.join(TOKEN_DTYPES)})"
        )
    vocab = meta.get("vocab_size")
    if (
        isinstance(vocab, int)
        and token_dtype(vocab).itemsize > np.dtype(str(meta["dtype"])).itemsize
    ):
        raise _damaged_meta(
            p,
            f"dtype={meta['dtype']} cannot hold the ids of vocab_size={vocab} (that needs "
            f"{token_dtype(vocab).name})",
        )
    tokens = meta.get("tokens")
    if (
        not isinstance(tokens, dict)
        or not tokens
        or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in tokens.values()
        )
    ):
        raise _damaged_meta(
            p, f'tokens={tokens!r} is not a count of tokens per split ({{"train": <n>, ...}})'
        )
    if not isinstance(meta.get("tokenizer"), dict):
        raise _damaged_meta(p, f"tokenizer={meta.get('tokenizer')!r} is not a tokenizer's state")
    return meta


# ---------------------------------------------------------------- encoding


def _progress(total: int, desc: str, unit: str = "char"):  # -> tqdm
    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=True,
        disable=total < _PROGRESS_MIN_CHARS,
        leave=False,
    )


def fit_if_needed(
    tokenizer: Tokenizer, splits: Mapping[str, Iterable[str]], source: str = "?"
) -> None:
    """Fit a vocabulary-from-data tokenizer (``char``) on the corpus if it has none yet.

    The character set is taken from every split (as nanoGPT's shakespeare_char does), so
    val/test text never holds a character the tokenizer cannot encode; it is a function of
    the corpus alone, hence deterministic across ranks and runs.
    """
    if getattr(tokenizer, "fitted", True):
        return
    chars: set[str] = set()
    for docs in splits.values():
        for doc in _iter_texts(docs):
            chars.update(doc)
    if not chars:
        raise _empty_split(source, "train", "no characters to build a vocabulary from")
    tokenizer.fit("".join(sorted(chars)))  # type: ignore[attr-defined]


def _empty_split(source: str, split: str, detail: str) -> DataError:
    return DataError(
        f"data={source}: the {split} split is empty ({detail}); give a corpus with text in it"
    )


def _iter_texts(docs: Any) -> Iterator[str]:
    if isinstance(docs, (list, tuple)):
        yield from docs
    else:  # datasets.Dataset / IterableDataset with a "text" column
        for row in docs:
            yield row["text"]


def _encode_rows(
    batch: dict[str, list[str]], state: dict[str, Any], eos: int | None
) -> dict[str, list]:
    """``datasets.map`` worker: rebuild the tokenizer from its state (once per process), encode."""
    tok = _worker_tokenizer(json.dumps(state, sort_keys=True))
    ids = tok.encode_batch(batch["text"], num_threads=1)
    if eos is not None:
        ids = [x + [eos] for x in ids]
    return {"ids": ids, "len": [len(x) for x in ids]}


_WORKER_TOKENIZERS: dict[str, Tokenizer] = {}


def _worker_tokenizer(state_json: str) -> Tokenizer:
    if state_json not in _WORKER_TOKENIZERS:
        _WORKER_TOKENIZERS[state_json] = tokenizer_from_state(json.loads(state_json))
    return _WORKER_TOKENIZERS[state_json]


def encode_split(
    docs: Any,
    tokenizer: Tokenizer,
    dest: Path,
    *,
    separate: bool,
    desc: str,
    num_proc: int = 1,
    num_threads: int | None = None,
) -> int:
    """Tokenize ``docs`` into the flat file ``dest``; returns the token count.

    ``docs`` is a list of strings (encoded in chunks with ``encode_batch`` threads), a
    ``datasets.Dataset`` (``map`` with ``num_proc`` processes, nanoGPT's recipe) or a
    streaming ``datasets.IterableDataset`` (read once, in chunks). With ``separate`` the
    tokenizer's eos follows every document.
    """
    dtype = token_dtype(tokenizer.vocab_size)
    eos = tokenizer.eos_token_id if separate else None
    num_threads = num_threads or os.cpu_count() or 1
    n = 0
    with atomic_path(dest) as tmp:
        if isinstance(docs, (list, tuple)):
            with open(tmp, "wb") as f, _progress(sum(map(len, docs)), desc) as bar:
                for i in range(0, len(docs), _CHUNK_DOCS):
                    chunk = list(docs[i : i + _CHUNK_DOCS])
                    for ids in tokenizer.encode_batch(chunk, num_threads=num_threads):
                        if eos is not None:
                            ids = [*ids, eos]
                        f.write(np.asarray(ids, dtype=dtype).tobytes())
                        n += len(ids)
                    bar.update(sum(map(len, chunk)))
        # datasets.Dataset: many processes, then one memmap written in shards
        elif hasattr(docs, "num_rows"):
            from tqdm.auto import tqdm

            mapped = docs.map(
                _encode_rows,
                batched=True,
                remove_columns=list(docs.column_names),
                num_proc=num_proc if num_proc > 1 else None,
                fn_kwargs={"state": tokenizer.state_dict(), "eos": eos},
                desc=f"tokenizing {desc}",
            )
            total = int(np.sum(mapped["len"], dtype=np.int64)) if mapped.num_rows else 0
            if total:
                arr = np.memmap(tmp, dtype=dtype, mode="w+", shape=(total,))
                shards = max(1, min(1024, mapped.num_rows // 1000))
                for s in tqdm(
                    range(shards),
                    desc=f"writing {dest.name}",
                    leave=False,
                    disable=total < _PROGRESS_MIN_CHARS,
                ):
                    part = mapped.shard(num_shards=shards, index=s, contiguous=True).with_format(
                        "numpy"
                    )
                    ids = np.concatenate(list(part["ids"])) if part.num_rows else np.zeros(0, dtype)
                    arr[n : n + len(ids)] = ids
                    n += len(ids)
                arr.flush()
                del arr
            else:
                tmp.write_bytes(b"")
        else:  # streaming: read once, encode in chunks
            from tqdm.auto import tqdm

            with (
                open(tmp, "wb") as f,
                tqdm(desc=f"tokenizing {desc}", unit="doc", leave=False) as bar,
            ):
                buf: list[str] = []
                for text in _iter_texts(docs):
                    buf.append(text)
                    if len(buf) == _CHUNK_DOCS * 4:
                        n += _write_chunk(f, tokenizer, buf, eos, dtype, num_threads)
                        bar.update(len(buf))
                        buf = []
                n += _write_chunk(f, tokenizer, buf, eos, dtype, num_threads)
                bar.update(len(buf))
    return n


def _write_chunk(
    f: Any, tok: Tokenizer, texts: list[str], eos: int | None, dtype: np.dtype, threads: int
) -> int:
    n = 0
    for ids in tok.encode_batch(texts, num_threads=threads) if texts else []:
        if eos is not None:
            ids = [*ids, eos]
        f.write(np.asarray(ids, dtype=dtype).tobytes())
        n += len(ids)
    return n


def _is_empty(docs: Any) -> bool:
    if isinstance(docs, (list, tuple)):
        return not any(docs)
    return getattr(docs, "num_rows", 1) == 0


def write_token_dir(
    splits: Mapping[str, Any],
    tokenizer: Tokenizer,
    out_dir: Path,
    *,
    source: str,
    separate: bool,
    fingerprint: Any = None,
    num_proc: int = 1,
    num_threads: int | None = None,
    encode: Callable[..., int] = encode_split,
) -> dict[str, Any]:
    """Fit the tokenizer if it learns from data, tokenize every split into ``out_dir``; returns
    ``meta``.

    ``encode`` writes one split (``encode_split``'s signature); ``src.prepare`` passes the
    resumable multi-process ``src.data.shards.encode_sharded``."""
    for (
        split
    ) in SPLITS:  # every source has a test split distinct from val (src/data/sources/base.py)
        if split not in splits or _is_empty(splits[split]):
            raise _empty_split(source, split, "no text")
    fit_if_needed(tokenizer, splits, source)
    out_dir.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for split, docs in splits.items():
        counts[split] = encode(
            docs,
            tokenizer,
            out_dir / f"{split}.bin",
            separate=separate,
            desc=f"{source}/{split}",
            num_proc=num_proc,
            num_threads=num_threads,
        )
        if counts[split] == 0 and split in SPLITS:
            raise _empty_split(source, split, "0 tokens after tokenizing")
    meta = {
        "version": CACHE_VERSION,
        "dtype": token_dtype(tokenizer.vocab_size).name,
        "vocab_size": tokenizer.vocab_size,
        "tokenizer": tokenizer.state_dict(),
        "source": source,
        "fingerprint": fingerprint,
        "tokens": counts,
    }
    write_meta(out_dir, meta)
    return meta


def open_tokens(out_dir: Path, split: str, meta: Mapping[str, Any]) -> np.ndarray:
    """The split's tokens as a read-only ``np.memmap`` (no copy; pages in on demand), after checking
    the file's length against ``meta.json``: a torn or odd-length file, another file, or a ``dtype``
    that ``meta.json`` misstates would otherwise train silently on the wrong tokens."""
    path = Path(out_dir) / f"{split}.bin"
    dtype = np.dtype(meta["dtype"])
    expected = meta["tokens"].get(split)
    fix = (
        f"prepare it again (python -m src.prepare ... overwrite=true), or delete {path.parent} (a "
        "token cache entry is rebuilt on the next run)"
    )
    if not path.is_file():
        what = "is missing" if not path.exists() else "is not a regular file"
        raise DataError(
            f"{path} {what}, but {path.parent / 'meta.json'} lists split {split!r}; {fix}"
        )
    size = path.stat().st_size
    if size % dtype.itemsize:
        raise DataError(
            f"{path}: {size} bytes is not a whole number of {dtype.name} tokens ({dtype.itemsize} "
            f"bytes each): the file is torn or was written with another dtype; {fix}"
        )
    n = size // dtype.itemsize
    if expected is not None and n != expected:
        other = [
            d for d in TOKEN_DTYPES if d != dtype.name and expected * np.dtype(d).itemsize == size
        ]
        why = (
            f"meta.json's dtype={dtype.name} is wrong: the file holds {expected} {other[0]} tokens"
            if other
            else "the file is torn, or another corpus's"
        )
        raise DataError(
            f"{path} holds {n} {dtype.name} tokens ({size} bytes) but {path.parent / 'meta.json'} "
            f"says tokens.{split}={expected} ({dtype.name}); {why}. {fix[0].upper()}{fix[1:]}"
        )
    if n == 0:
        raise DataError(f"{path} is empty (0 tokens); {fix}")
    return np.memmap(path, dtype=dtype, mode="r")
