"""Issue 21 items 8 and 14 (prepared data): a ``.bin`` whose length disagrees with ``meta.json`` (torn, odd
length, empty, another file) or whose dtype ``meta.json`` misstates, and a 0-byte, torn or wrong ``meta.json``,
are one ``DataError`` naming the file, before the first step; ``src.prepare`` into a directory prepared from
another corpus or with another tokenizer refuses to keep it unless ``overwrite=true``. Real prepared
directories (``src.prepare`` on a small text), damaged on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from src.data.cache import read_meta
from src.data.datamodule import build_datamodule
from src.data.tokenizers import build_tokenizer
from src.errors import DataError
from tests.data.test_prepare import run_prepare

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def prepared(conf_dir: Path, small_text: Path, tmp_path: Path, cache_dir: str) -> Path:
    return run_prepare(
        conf_dir,
        [
            "data=bin",
            f"data.dir={tmp_path / 'b'}",
            f"data.raw={{name:text,paths:[{small_text}]}}",
            f"data.cache_dir={cache_dir}",
            "num_proc=1",
        ],
    )


def setup_error(out: Path) -> str:
    dm = build_datamodule(
        {"name": "bin", "dir": str(out)},
        build_tokenizer({"name": "gpt2"}),
        block_size=8,
        batch_size=2,
        seed=0,
    )
    with pytest.raises(DataError) as info:
        dm.setup("fit")
    return str(info.value)


def test_the_prepared_directory_trains(prepared: Path) -> None:
    dm = build_datamodule(
        {"name": "bin", "dir": str(prepared)},
        build_tokenizer({"name": "gpt2"}),
        block_size=8,
        batch_size=2,
        seed=0,
    )
    dm.setup("fit")
    assert len(dm.tokens["train"]) == read_meta(prepared)["tokens"]["train"]


def _truncate(p: Path, n: int) -> None:
    with open(p, "r+b") as f:
        f.truncate(n)


DAMAGE: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    "empty bin": (lambda d: _truncate(d / "val.bin", 0), ("val.bin", "holds 0 uint16 tokens")),
    "odd-length bin": (
        lambda d: _truncate(d / "train.bin", (d / "train.bin").stat().st_size - 1),
        ("train.bin", "not a whole number of uint16 tokens"),
    ),
    "torn bin": (
        lambda d: _truncate(d / "train.bin", (d / "train.bin").stat().st_size // 2),
        ("train.bin", "says tokens.train=", "torn"),
    ),
    "empty meta.json": (
        lambda d: (d / "meta.json").write_bytes(b""),
        ("meta.json", "cannot be read as JSON"),
    ),
    "torn meta.json": (
        lambda d: (d / "meta.json").write_text((d / "meta.json").read_text()[:40]),
        ("meta.json", "cannot be read as JSON"),
    ),
    "meta.json list": (
        lambda d: (d / "meta.json").write_text("[]"),
        ("meta.json", "not an object"),
    ),
    "unknown dtype": (lambda d: _edit_meta(d, dtype="float64"), ("meta.json", "dtype='float64'")),
    "dtype too narrow": (
        lambda d: _edit_meta(d, vocab_size=100_000),
        ("meta.json", "vocab_size=100000", "uint32"),
    ),
    "no token counts": (lambda d: _edit_meta(d, tokens=None), ("meta.json", "tokens=None")),
}


def _edit_meta(d: Path, **changes: object) -> None:
    meta = json.loads((d / "meta.json").read_text())
    meta.update(changes)
    (d / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_prepared_directory_is_one_error_naming_the_file(
    prepared: Path, case: str
) -> None:
    damage, expected = DAMAGE[case]
    damage(prepared)
    message = setup_error(prepared)
    for part in expected:
        assert part in message, message
    assert "overwrite=true" in message or "prepare" in message


def test_a_misstated_dtype_is_named(prepared: Path) -> None:
    """meta.json says uint32 for a file of uint16 ids (same count): it would read pairs of ids as one."""
    counts = read_meta(prepared)["tokens"]
    _edit_meta(prepared, dtype="uint32")
    message = setup_error(prepared)
    split = next(s for s in counts if f"/{s}.bin" in message)  # the first split read
    assert (
        "dtype=uint32 is wrong" in message
        and f"the file holds {counts[split]} uint16 tokens" in message
    )


def test_a_fifo_in_place_of_a_bin_is_not_read(prepared: Path) -> None:
    (prepared / "val.bin").unlink()
    os.mkfifo(prepared / "val.bin")  # opening it for reading would block forever
    message = setup_error(prepared)
    assert "val.bin is not a regular file" in message


def test_prepare_into_a_directory_of_another_corpus_is_refused(
    conf_dir: Path, prepared: Path, tmp_path: Path, cache_dir: str
) -> None:
    other = tmp_path / "other.txt"
    other.write_text("a different corpus entirely. " * 300)
    before = (prepared / "train.bin").read_bytes()
    args = [
        "data=bin",
        f"data.dir={prepared}",
        f"data.raw={{name:text,paths:[{other}]}}",
        f"data.cache_dir={cache_dir}",
        "num_proc=1",
    ]
    with pytest.raises(DataError) as info:
        run_prepare(conf_dir, args)
    message = str(info.value)
    assert (
        str(prepared) in message
        and "small.txt" in message
        and "other.txt" in message
        and "overwrite=true" in message
    )
    assert (
        prepared / "train.bin"
    ).read_bytes() == before  # the old corpus stays, nothing half-written
    run_prepare(conf_dir, [*args, "overwrite=true"])  # told to: replaced
    assert read_meta(prepared)["tokens"]["train"] != len(before) // 2


def test_prepare_with_another_tokenizer_is_refused(
    conf_dir: Path, prepared: Path, small_text: Path, cache_dir: str
) -> None:
    with pytest.raises(DataError) as info:
        run_prepare(
            conf_dir,
            [
                "data=bin",
                f"data.dir={prepared}",
                f"data.raw={{name:text,paths:[{small_text}]}}",
                f"data.cache_dir={cache_dir}",
                "tokenizer=char",
                "num_proc=1",
            ],
        )
    assert (
        "tokenizer" in str(info.value)
        and '"gpt2"' in str(info.value)
        and '"char"' in str(info.value)
    )


def test_prepare_again_with_the_same_input_keeps_it(
    conf_dir: Path, prepared: Path, small_text: Path, cache_dir: str
) -> None:
    mtime = (prepared / "train.bin").stat().st_mtime_ns
    run_prepare(
        conf_dir,
        [
            "data=bin",
            f"data.dir={prepared}",
            f"data.raw={{name:text,paths:[{small_text}]}}",
            f"data.cache_dir={cache_dir}",
            "num_proc=1",
        ],
    )
    assert (prepared / "train.bin").stat().st_mtime_ns == mtime


@pytest.mark.slow
def test_the_training_command_line_says_it_in_one_line(prepared: Path, tmp_path: Path) -> None:
    _truncate(prepared / "train.bin", (prepared / "train.bin").stat().st_size - 1)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "src.train",
            "model=tiny",
            "data=bin",
            f"data.dir={prepared}",
            "tokenizer=gpt2",
            "trainer=cpu",
            "trainer.max_steps=1",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HYDRA_FULL_ERROR": "0", "HF_HUB_OFFLINE": "1"},
    )
    assert (
        r.returncode == 1
        and "DataError" in r.stderr
        and "train.bin" in r.stderr
        and "Traceback" not in r.stderr
    ), r.stderr[-2000:]
