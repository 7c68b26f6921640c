"""One-time tokenization of a corpus into ``train.bin``/``val.bin`` (nanoGPT's prepare step).

    python -m src.prepare data=openwebtext                       # ~54 GB download, many processes
    python -m src.prepare data=text data.paths=[books/*.txt] out_dir=data/books
    python -m src.train data=bin data.dir=data/books ...          # training reads them via np.memmap

For ``data=bin``/``data=openwebtext`` the text comes from ``data.raw`` (a data config node,
e.g. the hub's openwebtext) and lands in ``data.dir``; for any other text source it lands
in ``out_dir``, or, by default, in the token cache entry that training with the same
``data``/``tokenizer`` will find. Each split is tokenized by ``num_proc`` processes in shards
of ``shard_docs`` documents with a progress bar, and an interrupted run resumes from the
shards already written (``src.data.shards``).

    python -m src.prepare data=fineweb_edu                       # FineWeb-Edu 10B sample (~28 GB download)
    python -m src.prepare shared-data --out ../shared            # the docs' public data + nanoGPT peer
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from src.cli import hydra_entry
from src.data.cache import read_meta, token_dir_for, write_token_dir
from src.data.shards import DEFAULT_SHARD_DOCS, encode_sharded
from src.data.sources import build_source, split_config
from src.data.sources.base import LMSource
from src.data.sources.openwebtext import BinDir
from src.data.tokenizers import build_tokenizer
from src.errors import DataError
from src.runs.output_dir import check_output_dir

log = logging.getLogger(__name__)


def prepare(
    data: dict[str, Any],
    tokenizer_cfg: dict[str, Any],
    out_dir: str | None = None,
    num_proc: int = 8,
    overwrite: bool = False,
    shard_docs: int = DEFAULT_SHARD_DOCS,
) -> Path:
    """Tokenize the corpus described by ``data`` with ``tokenizer_cfg``; returns the output
    directory."""
    tokenizer = build_tokenizer(tokenizer_cfg)
    kind, node, _ = split_config(data)
    source = build_source(node)
    if isinstance(source, BinDir):
        if not source.raw:
            raise DataError(
                f"data.raw={source.raw!r} is invalid: give the text source to prepare from, e.g. "
                "data.raw={name:text,paths:[corpus.txt]}"
            )
        _, raw, _ = split_config({"cache_dir": str(source.cache_dir), **source.raw})
        text = build_source(raw)
        out = Path(out_dir).expanduser() if out_dir else source.dir
    else:
        text = source
        out = Path(out_dir).expanduser() if out_dir else token_dir_for(source, tokenizer)
    if not isinstance(text, LMSource):
        raise DataError(
            f"data.name={text.name!r} is invalid: src.prepare tokenizes text sources "
            "(tinyshakespeare, text, hf, embedded)"
        )
    if not overwrite and (meta := read_meta(out)) is not None:
        check_same_input(out, meta, text, tokenizer)
        log.info("%s is already prepared (%s); pass overwrite=true to redo it", out, meta["tokens"])
        return out
    # a file there, a path under a file, /proc/x, read-only: one clear error before any tokenizing
    key = "out_dir" if out_dir else ("data.dir" if isinstance(source, BinDir) else "data.cache_dir")
    check_output_dir(out, key)
    with one_writer(out, key):
        meta = write_token_dir(
            text.splits(),
            tokenizer,
            out,
            source=text.name,
            separate=text.separate_documents,
            fingerprint=text.fingerprint(),
            num_proc=int(num_proc),
            encode=partial(encode_sharded, shard_docs=int(shard_docs)),
        )
    for split, n in meta["tokens"].items():
        log.info("%s/%s.bin: %d tokens (%s)", out, split, n, meta["dtype"])
    return out


@contextlib.contextmanager
def one_writer(out: Path, key: str) -> Iterator[None]:
    """One ``src.prepare`` at a time per output directory: ``fcntl.flock`` on the directory
    (released when the process ends, even when killed). A second one stops at once with a
    ``DataError`` naming it: two would share one ``.shards`` folder and remove each other's shards
    (a raw ``FileNotFoundError``)."""
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DataError(
                f"{key}={out} is being prepared by another python -m src.prepare right now; wait "
                "for it to finish (run this command again then: it finds the directory prepared), "
                f"or give another {key}"
            ) from None
        yield
    finally:
        os.close(fd)  # releases the lock


def check_same_input(out: Path, meta: dict[str, Any], text: LMSource, tokenizer: Any) -> None:
    """A directory already prepared is kept only when it was made from this input with this
    tokenizer; else a ``DataError`` naming both, never "already prepared" over another corpus.
    ``overwrite=true`` replaces it."""
    # an unfitted char vocabulary: its name
    want_tok = {k: v for k, v in tokenizer.state_dict().items() if v is not None}
    have_tok = meta.get("tokenizer") or {}
    diffs = []
    if any(have_tok.get(k) != v for k, v in want_tok.items()):
        diffs.append(
            f"tokenizer {json.dumps(have_tok, default=str)[:120]} there, "
            f"{json.dumps(want_tok, default=str)[:120]} asked"
        )
    want_fp = json.loads(json.dumps(text.fingerprint(), default=str))
    if meta.get("source") != text.name or meta.get("fingerprint") != want_fp:
        diffs.append(
            f"corpus data={meta.get('source')} {_corpus(meta.get('fingerprint'))} there, "
            f"data={text.name} {_corpus(want_fp)} asked"
        )
    if diffs:
        raise DataError(
            f"{out} is already prepared from other input ({'; '.join(diffs)}); pass overwrite=true "
            "to replace it, or give another out_dir (data.dir for data=bin/openwebtext)"
        )


def _corpus(fingerprint: Any) -> str:
    """A source's fingerprint in a few words: the files it names, else a short hash of it."""
    paths: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                paths.append(str(v)) if k == "path" and isinstance(v, str) else walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(fingerprint)
    if paths:
        return (
            "("
            + ", ".join(paths[:3])
            + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
            + ")"
        )
    digest = hashlib.blake2b(
        json.dumps(fingerprint, sort_keys=True, default=str).encode(), digest_size=6
    ).hexdigest()
    return f"(fingerprint {digest})"


@hydra_entry("prepare")
def main(cfg: DictConfig) -> None:
    out = prepare(
        OmegaConf.to_container(cfg.data, resolve=True),
        OmegaConf.to_container(cfg.tokenizer, resolve=True),  # type: ignore[arg-type]
        cfg.out_dir,
        cfg.num_proc,
        cfg.overwrite,
        cfg.shard_docs,
    )
    meta = read_meta(out) or {}
    tokens = ", ".join(f"{split} {n:,}" for split, n in meta.get("tokens", {}).items())
    print(
        f"prepared: {out}  ({tokens} tokens, {meta.get('dtype')}); train with data=bin "
        f"data.dir={out}"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["shared-data"]:  # the public files the docs use (src/data/shared_data.py)
        from src.data.shared_data import main as fetch_shared_data

        fetch_shared_data(sys.argv[2:])
    else:
        main()
