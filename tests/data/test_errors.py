"""Every data error, triggered for real: a ``DataError`` whose message names the key (or file), the
offending value and the fix (each message is written where it is raised, in src/data)."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from src.data.cache import write_meta
from src.data.datamodule import build_datamodule
from src.data.sources import build_source
from src.data.sources.base import download
from src.data.tokenizers import build_tokenizer
from src.errors import DataError


def dm(cfg: dict, tok: str = "char", block_size: int = 8, batch_size: int = 2, **kw):
    return build_datamodule(
        cfg,
        build_tokenizer({"name": tok}),
        block_size=block_size,
        batch_size=batch_size,
        seed=0,
        **kw,
    )


def setup(cfg: dict, tok: str = "char", **kw) -> None:
    d = dm(cfg, tok, **kw)
    d.prepare_tokenizer()
    d.setup("fit")
    d.val_dataloader()
    d.train_dataloader()


def gz(path: Path, n: int) -> None:
    path.write_bytes(gzip.compress("".join(f"line {i}\n" for i in range(n)).encode()))


def multi30k(folder: Path, de_train_lines: int = 3) -> Path:
    folder.mkdir(exist_ok=True)
    for split in ("train", "val", "test_2016_flickr"):
        gz(folder / f"{split}.en.gz", 3)
        gz(folder / f"{split}.de.gz", de_train_lines if split == "train" else 3)
    return folder


def bins(folder: Path, tokenizer_state: dict) -> Path:
    """A prepared token directory (as src.prepare writes it) made with ``tokenizer_state``."""
    folder.mkdir()
    for split in ("train", "val"):
        np.arange(100, dtype=np.uint16).tofile(folder / f"{split}.bin")
    write_meta(
        folder,
        {"dtype": "uint16", "tokenizer": tokenizer_state, "tokens": {"train": 100, "val": 100}},
    )
    return folder


def bad_bins(folder: Path) -> Path:
    """A prepared GPT-2 token directory whose train.bin holds one id (60000) beyond the vocabulary."""
    folder.mkdir()
    for split in ("train", "val", "test"):
        ids = np.arange(100, dtype=np.uint16)
        ids[42] = 60000 if split == "train" else 0
        ids.tofile(folder / f"{split}.bin")
    write_meta(
        folder,
        {
            "dtype": "uint16",
            "tokenizer": {"name": "gpt2"},
            "tokens": {"train": 100, "val": 100, "test": 100},
        },
    )
    return folder


# (case id, trigger(tmp_path, cache_dir), the key or file and the offending value as the message writes them,
#  a stable part of the fix); {tmp} is tmp_path
CASES: list[tuple[str, Callable[[Path, str], object], tuple[str, ...], str]] = [
    (
        "missing_file",
        lambda t, c: build_source({"name": "tinyshakespeare", "path": f"{t}/nope.txt"}).splits(),
        ("data.path='{tmp}/nope.txt'", "no such file"),
        "leave data.path unset to download it",
    ),
    (
        "missing_text_file",
        lambda t, c: build_source({"name": "text", "paths": [f"{t}/nope.txt"]}),
        ("data.paths='{tmp}/nope.txt'", "no such file"),
        "give existing text files or globs in data.paths",
    ),
    (
        "text_directory_without_text_files",
        lambda t, c: build_source({"name": "text", "paths": [str(t)]}),
        ("data.paths='{tmp}'", "is a directory with no .txt/.txt.gz/.jsonl/.jsonl.gz file"),
        "data.paths=['{tmp}/**/*.txt']",
    ),
    (
        "text_without_path",
        lambda t, c: build_source({"name": "text"}),
        ("data=text",),
        "data.path=<file or directory>",
    ),
    (
        "jsonl_line_without_the_text_field",
        lambda t, c: (
            t.joinpath("d.jsonl").write_text('{"body": "x"}\n'),
            build_source({"name": "text", "path": f"{t}/d.jsonl"}).splits(),
        ),
        ("{tmp}/d.jsonl:1", "text_field='text'", "its keys: body"),
        "set data.text_field",
    ),
    (
        "file_path_is_a_directory",
        lambda t, c: build_source({"name": "tinyshakespeare", "path": str(t)}).splits(),
        ("data.path='{tmp}'", "is a directory, not a file"),
        "give the char-rnn input.txt",
    ),
    (
        "folder_path_is_a_file",
        lambda t, c: (
            t.joinpath("f.gz").write_bytes(b""),
            build_source({"name": "multi30k", "path": f"{t}/f.gz"}).pairs(),
        ),
        ("data.path='{tmp}/f.gz'", "is a file, not a directory"),
        "data.path must be a folder with train.en.gz",
    ),
    (
        "bin_dir_is_a_file",
        lambda t, c: (
            t.joinpath("train.bin").write_bytes(b""),
            setup({"name": "bin", "dir": f"{t}/train.bin"}, "gpt2"),
        ),
        ("data.dir='{tmp}/train.bin'", "is a file, not a directory"),
        "point data.dir at the directory python -m src.prepare data=bin wrote",
    ),
    (
        "no_files_match",
        lambda t, c: build_source({"name": "text", "paths": [f"{t}/*.md"]}),
        ("data.paths=['{tmp}/*.md']", "matches no files"),
        "e.g. data.paths=[notes/*.txt]",
    ),
    (
        "missing_multi30k_file",
        lambda t, c: build_source({"name": "multi30k", "path": str(t)}).pairs(),
        ("data.path='{tmp}/train.en.gz'", "no such file"),
        "leave it unset to download them",
    ),
    (
        "empty_corpus",
        lambda t, c: (
            t.joinpath("e.txt").write_text(""),
            setup({"name": "text", "paths": [f"{t}/e.txt"], "cache_dir": c}),
        ),
        ("data=text", "the train split is empty (no text)"),
        "give a corpus with text in it",
    ),
    (
        "too_short",
        lambda t, c: (
            t.joinpath("s.txt").write_text("x" * 60),
            setup({"name": "text", "paths": [f"{t}/s.txt"], "cache_dir": c}, block_size=64),
        ),
        ("data=text", "the train split has 48 tokens", "block_size+1 = 65"),
        "use more text or a smaller block_size",
    ),
    (
        "too_short_val",
        lambda t, c: (
            t.joinpath("s.txt").write_text("ab" * 100),
            setup({"name": "text", "paths": [f"{t}/s.txt"], "cache_dir": c}, block_size=32),
        ),
        ("data=text", "the val split has 20 tokens", "block_size+1 = 33"),
        "use more text or a smaller block_size",
    ),
    (
        "too_few_windows",
        lambda t, c: (
            t.joinpath("s.txt").write_text("ab" * 100),
            setup(
                {"name": "text", "paths": [f"{t}/s.txt"], "cache_dir": c},
                block_size=9,
                world_size=4,
                rank=0,
            ),
        ),
        ("data=text", "the val split has 2 windows", "world size 4"),
        "use more val text, a smaller block_size or fewer devices",
    ),
    (
        "undecodable",
        lambda t, c: (
            t.joinpath("b.txt").write_bytes(b"caf\xc3\xa9 ok \xff\xfe"),
            build_source({"name": "text", "paths": [f"{t}/b.txt"]}).splits(),
        ),
        ("{tmp}/b.txt", "offset 9", "not valid utf-8 (invalid start byte)"),
        "set data.encoding to its encoding",
    ),
    (
        "line_count_mismatch",
        lambda t, c: build_source(
            {"name": "multi30k", "path": str(multi30k(t / "m", de_train_lines=2))}
        ).pairs(),
        ("{tmp}/m/train.en.gz has 3 lines", "{tmp}/m/train.de.gz has 2"),
        "translation files must align line by line",
    ),
    (
        "download_failed",
        lambda t, c: build_source(
            {"name": "tinyshakespeare", "cache_dir": str(t), "url": "http://127.0.0.1:9/input.txt"}
        ).splits(),
        ("could not download tinyshakespeare from http://127.0.0.1:9/input.txt",),
        "Put the file at {tmp}/tinyshakespeare/input.txt or pass data.path=/path/to/input.txt",
    ),
    (
        "needs_special_tokens",
        lambda t, c: dm({"name": "multi30k", "path": str(multi30k(t / "m"))}, "char"),
        ("data=multi30k", "tokenizer=char has eos=None, pad=None"),
        "use tokenizer=gpt2 or tokenizer=hf",
    ),
    (
        "too_few_pairs",
        lambda t, c: setup(
            {"name": "multi30k", "path": str(multi30k(t / "m")), "cache_dir": c},
            "gpt2",
            batch_size=4,
        ),
        (
            "data=multi30k",
            "the train split has 3 pairs, fewer than 4 (batch_size 4 x world size 1)",
        ),
        "use a smaller batch size or fewer devices",
    ),
    (
        "unknown_source",
        lambda t, c: dm({"name": "wiki"}),
        ("data source 'wiki'",),
        "registered sources: addition, bin, copy, embedded, hf, induction, mqar, multi30k, openwebtext, reverse, "
        "selective_copy, sort, text, tinyshakespeare",
    ),
    (
        "unknown_key",
        lambda t, c: dm({"name": "embedded", "val_frac": 0.2}),
        ("data.val_frac=0.2", "data=embedded", "(did you mean data.val_fraction?)"),
        "(accepted: cache_dir, val_fraction, test_fraction, piece_chars); fix the spelling",
    ),
    (
        "bad_fraction",
        lambda t, c: dm({"name": "tinyshakespeare", "val_fraction": 1.5}),
        ("data.val_fraction=1.5",),
        "must be in [0, 1)",
    ),
    (
        "bad_value",
        lambda t, c: dm({"name": "multi30k", "src_lang": "fr"}, "gpt2"),
        ("data.src_lang='fr'",),
        "Multi30k task 1 has 'en' and 'de'",
    ),
    (
        "no_test_fraction",
        lambda t, c: dm({"name": "tinyshakespeare", "test_fraction": 0}),
        ("data.test_fraction=0",),
        "use e.g. 0.05",
    ),
    (
        "no_test_split",
        lambda t, c: (
            bins(t / "b", {"name": "gpt2"}),
            build_datamodule(
                {"name": "bin", "dir": str(t / "b")},
                build_tokenizer({"name": "gpt2"}),
                block_size=8,
                batch_size=2,
                seed=0,
            ).setup("fit"),
        ),
        ("data=bin", "{tmp}/b has no test split"),
        "re-run python -m src.prepare",
    ),
    (
        "hf_missing_column",
        lambda t, c: (
            t.joinpath("r.jsonl").write_text('{"body": "x"}\n' * 20),
            build_source(
                {
                    "name": "hf",
                    "path": "json",
                    "data_files": str(t / "r.jsonl"),
                    "val_fraction": 0.1,
                }
            ).splits(),
        ),
        ("data.text_column='text'", "json split 'train'"),
        "its columns are ['body']",
    ),
    (
        "checksum_mismatch",
        lambda t, c: (
            t.joinpath("f.txt").write_text("hello"),
            download(
                f"file://{t}/f.txt",
                t / "d" / "f.txt",
                what="a test file",
                key="path",
                sha256="0" * 64,
            ),
        ),
        (
            "file://{tmp}/f.txt",
            "sha256 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
            "0" * 64,
        ),
        "pass data.path= a good copy",
    ),
    (
        "bins_missing",
        lambda t, c: setup({"name": "bin", "dir": str(t / "nothing")}, "gpt2"),
        ("data.dir='{tmp}/nothing'", "has no train.bin"),
        "python -m src.prepare data=bin",
    ),
    (
        "token_out_of_vocab",
        lambda t, c: build_datamodule(
            {"name": "bin", "dir": str(bad_bins(t / "b"))},
            build_tokenizer({"name": "gpt2"}),
            block_size=8,
            batch_size=2,
            seed=0,
        ).setup("fit"),
        (
            "{tmp}/b/train.bin",
            "token id 60000 at position 42 (byte offset 84, uint16)",
            "(tokenizer=gpt2 has 50257 ids)",
        ),
        "Prepare it again with this run's tokenizer",
    ),
    (
        "tokenizer_mismatch",
        lambda t, c: (
            bins(t / "b", {"name": "gpt2"}),
            build_datamodule(
                {"name": "bin", "dir": str(t / "b")},
                build_tokenizer({"name": "char", "chars": "abc"}),
                block_size=8,
                batch_size=2,
                seed=0,
            ).setup("fit"),
        ),
        (
            "{tmp}/b was tokenized with {{'name': 'gpt2'}}",
            "the run uses {{'name': 'char', 'chars': 'abc'}}",
        ),
        "or choose tokenizer=gpt2",
    ),
]


@pytest.mark.parametrize(("case", "trigger", "names", "fix"), CASES, ids=[c[0] for c in CASES])
def test_error_text(
    case: str, trigger, names: tuple[str, ...], fix: str, tmp_path: Path, cache_dir: str
) -> None:
    with pytest.raises(DataError) as e:
        trigger(tmp_path, cache_dir)
    text = str(e.value)
    missing = [part for part in (*names, fix) if part.format(tmp=tmp_path) not in text]
    assert not missing, f"{case}: {missing} not in the message:\n{text}"


def test_download_to_the_cache(tmp_path: Path) -> None:
    """The download path itself, offline: a file:// URL, checksum verified, then reused."""
    (tmp_path / "input.txt").write_text("To be, or not to be\n" * 10)
    cfg = {
        "name": "tinyshakespeare",
        "cache_dir": str(tmp_path / "c"),
        "url": f"file://{tmp_path}/input.txt",
    }
    s = build_source(cfg).splits()
    assert (tmp_path / "c" / "tinyshakespeare" / "input.txt").is_file() and s["train"][
        0
    ].startswith("To be")


def test_hf_offline_unknown_dataset_says_what_works(cache_dir: str) -> None:
    with pytest.raises(DataError) as e:
        build_source(
            {"name": "hf", "path": "surely/not-a-cached-dataset-xyz", "cache_dir": cache_dir}
        ).splits()
    text = str(e.value)  # the dataset, why, and what works offline
    assert text.startswith(
        "datasets.load_dataset('surely/not-a-cached-dataset-xyz', None) failed: "
    )
    assert "data.path=text data.data_files=" in text and "data=embedded works" in text
