"""Tokenising a large corpus: several processes, a progress bar, and a restart that resumes.

``encode_sharded`` has ``encode_split``'s signature (``src.data.cache``) and is what
``python -m src.prepare`` uses. A split of ``D`` documents is cut into shards of
``shard_docs`` documents; a pool of ``num_proc`` processes tokenises them, and each finished
shard is written atomically (temporary name, then rename) as::

    <out>/.shards/<split>/plan.json       what the shards are of: documents, shard size, tokenizer, source
    <out>/.shards/<split>/00000.bin ...   shard k = documents [k·shard_docs, (k+1)·shard_docs), flat ids

A killed run loses at most the shards in flight: run the same command again and every shard
already on disk is kept (a different plan, i.e. other documents, shard size or tokenizer,
starts over). When all are there they are concatenated, in order, into ``<split>.bin``
(streamed, one shard in memory at a time) and ``.shards/<split>`` is removed, so the result is
byte-identical to a single-process ``encode_split``. The bar counts documents and tokens.

Inputs: a ``datasets.Dataset`` (e.g. FineWeb-Edu's parquet files, rows read by index from
its memory-mapped Arrow cache in each worker) or a list of strings. A streaming
``IterableDataset`` has no random access; it goes to ``encode_split``'s one-pass reader.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from src.data.cache import encode_split, token_dtype
from src.data.tokenizers import Tokenizer, tokenizer_from_state
from src.files import atomic_path, atomic_write, confine

SHARDS = ".shards"
DEFAULT_SHARD_DOCS = (
    20_000  # ~20 M GPT-2 tokens of web text per shard: a few seconds of one process
)

# worker state (set once per process by _init_worker)
_docs: Any = None
_tok: Tokenizer | None = None
_eos: int | None = None
_dtype: np.dtype | None = None


def _init_worker(docs: Any, state: dict[str, Any], eos: int | None, dtype: str) -> None:
    global _docs, _tok, _eos, _dtype
    _docs, _tok, _eos, _dtype = docs, tokenizer_from_state(state), eos, np.dtype(dtype)


def _texts(docs: Any, start: int, stop: int) -> list[str]:
    if isinstance(docs, (list, tuple)):
        return list(docs[start:stop])
    return list(docs[start:stop]["text"])  # datasets.Dataset: a slice is a dict of columns


def _encode_shard(task: tuple[int, int, int, str]) -> tuple[int, int, int]:
    """Tokenise documents [start, stop) into ``path``; returns (shard, documents, tokens)."""
    k, start, stop, path = task
    assert _tok is not None and _dtype is not None
    ids = _tok.encode_batch(_texts(_docs, start, stop), num_threads=1)
    if _eos is not None:
        ids = [[*x, _eos] for x in ids]
    flat = np.fromiter((t for x in ids for t in x), dtype=_dtype, count=sum(map(len, ids)))
    dest = Path(path)
    # <out>/.shards/<split>/<k>.bin: confined to <out>
    with atomic_path(dest, root=dest.parents[2]) as tmp:
        flat.tofile(tmp)
    return k, stop - start, int(flat.size)


def _plan(
    docs: Any, tokenizer: Tokenizer, separate: bool, shard_docs: int, source: str
) -> dict[str, Any]:
    fingerprint = getattr(docs, "_fingerprint", None)  # datasets' content hash of the split
    if fingerprint is None:  # a list of strings: their lengths and ends stand for the contents
        fingerprint = [
            len(docs),
            sum(map(len, docs)),
            docs[0][:64] if docs else "",
            docs[-1][-64:] if docs else "",
        ]
    return {
        "documents": len(docs),
        "shard_docs": shard_docs,
        "separate": separate,
        "source": source,
        "tokenizer": tokenizer.state_dict(),
        "data": fingerprint,
    }


def shard_dir(dest: Path) -> Path:
    """Where the shards of ``<out>/<split>.bin`` are kept until it is complete."""
    return dest.parent / SHARDS / dest.stem


def encode_sharded(
    docs: Any,
    tokenizer: Tokenizer,
    dest: Path,
    *,
    separate: bool,
    desc: str,
    num_proc: int = 1,
    num_threads: int | None = None,
    shard_docs: int = DEFAULT_SHARD_DOCS,
) -> int:
    """Tokenise ``docs`` into ``dest`` through resumable shards (module docstring); returns the
    token count."""
    # streaming: one pass, no shards
    if not (isinstance(docs, (list, tuple)) or hasattr(docs, "num_rows")):
        return encode_split(
            docs,
            tokenizer,
            dest,
            separate=separate,
            desc=desc,
            num_proc=num_proc,
            num_threads=num_threads,
        )
    from tqdm.auto import tqdm

    dtype = token_dtype(tokenizer.vocab_size)
    root = shard_dir(dest)
    plan = _plan(docs, tokenizer, separate, int(shard_docs), desc)
    plan_file = root / "plan.json"
    # a .shards link out of the output directory: refused before any rmtree or write
    confine(plan_file, dest.parent)
    if plan_file.is_file() and json.loads(plan_file.read_text()) != json.loads(
        json.dumps(plan, default=str)
    ):
        # shards of other documents, another shard size or tokenizer: start over
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    atomic_write(plan_file, json.dumps(plan, default=str), root=dest.parent)
    n_docs = len(docs)
    n_shards = max(1, math.ceil(n_docs / shard_docs))
    paths = [root / f"{k:05d}.bin" for k in range(n_shards)]
    todo = [
        (k, k * shard_docs, min(n_docs, (k + 1) * shard_docs), str(p))
        for k, p in enumerate(paths)
        if not p.is_file()
    ]
    done_docs = n_docs - sum(stop - start for _, start, stop, _ in todo)
    eos = tokenizer.eos_token_id if separate else None
    with tqdm(
        total=n_docs, initial=done_docs, desc=f"tokenizing {desc}", unit="doc", unit_scale=True
    ) as bar:
        bar.set_postfix_str(f"{n_shards - len(todo)}/{n_shards} shards on disk")
        tokens = sum(p.stat().st_size for p in paths if p.is_file()) // dtype.itemsize
        init = (docs, tokenizer.state_dict(), eos, dtype.name)
        if todo and num_proc > 1:
            with mp.get_context("fork").Pool(
                min(num_proc, len(todo)), initializer=_init_worker, initargs=init
            ) as pool:
                for _, d, t in pool.imap_unordered(_encode_shard, todo):
                    tokens += t
                    bar.update(d)
                    bar.set_postfix_str(f"{tokens:,} tokens")
        else:
            _init_worker(*init)
            for task in todo:
                _, d, t = _encode_shard(task)
                tokens += t
                bar.update(d)
                bar.set_postfix_str(f"{tokens:,} tokens")
    tokens = sum(p.stat().st_size for p in paths) // dtype.itemsize
    with atomic_path(dest, root=dest.parent) as tmp, open(tmp, "wb") as out:
        for p in tqdm(paths, desc=f"writing {dest.name}", unit="shard", leave=False):
            with open(p, "rb") as f:
                shutil.copyfileobj(f, out, length=1 << 24)
    shutil.rmtree(root)
    if not any((dest.parent / SHARDS).iterdir()):
        (dest.parent / SHARDS).rmdir()
    return tokens
