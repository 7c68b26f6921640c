"""Issue 21 item 14 (evaluation files): invalid UTF-8, an empty file, a ``.gz`` that is not gzip, a torn
or non-object JSON line, a FIFO or a device given as a task's path are one ``DataError`` naming the file,
where they were raw tracebacks (``UnicodeDecodeError``, ``BadGzipFile``) or "no such file"."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from src.errors import DataError
from src.evaluation.benchmarks.base import build_benchmark
from src.evaluation.inputs import read_jsonl, read_text

REPO = Path(__file__).resolve().parents[2]


def _fifo(p: Path) -> Path:
    os.mkfifo(p)
    return p


FILES: dict[str, tuple[str, Callable[[Path], Path], str]] = {
    "invalid utf-8": (
        "bad.txt",
        lambda p: (p.write_bytes(b"hello \xff\xfe world\n"), p)[1],
        "not valid UTF-8",
    ),
    "empty": ("empty.txt", lambda p: (p.write_bytes(b""), p)[1], "is empty"),
    "fake gz": (
        "fake.txt.gz",
        lambda p: (p.write_bytes(b"not gzip at all\n"), p)[1],
        "cannot be read as .gz",
    ),
    "cut xz": (
        "cut.txt.xz",
        lambda p: (p.write_bytes(b"\xfd7zXZ\x00\x00"), p)[1],
        "cannot be read as .xz",
    ),
    "fifo": ("pipe.txt", _fifo, "is a FIFO (named pipe), not a regular file"),
}


@pytest.mark.parametrize("case", sorted(FILES))
def test_a_bad_evaluation_file_names_itself(tmp_path: Path, case: str) -> None:
    name, make, what = FILES[case]
    path = make(tmp_path / name)
    with pytest.raises(DataError) as info:
        read_text(path)
    assert str(path) in str(info.value) and what in str(info.value)


def test_a_device_is_not_read_as_a_file() -> None:
    with pytest.raises(DataError) as info:
        read_text("/dev/zero")  # would never end
    assert "/dev/zero" in str(info.value) and "character device" in str(info.value)


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ('{"text": "abc"\n', ":1 is not valid JSON"),
        ("[1, 2]\n", "holds a JSON list"),
        ("\n\n", "holds no JSON records"),
    ],
)
def test_bad_json_lines_name_the_file_and_line(tmp_path: Path, text: str, what: str) -> None:
    path = tmp_path / "data.jsonl"
    path.write_text(text)
    with pytest.raises(DataError) as info:
        list(read_jsonl(path))
    assert str(path) in str(info.value) and what in str(info.value)


@pytest.mark.parametrize("task", ["perplexity", "lambada", "hellaswag"])
def test_every_benchmark_reads_through_the_checks(tmp_path: Path, task: str) -> None:
    path = tmp_path / "fake.jsonl.gz"
    path.write_bytes(b"plain text, not gzip\n")
    bench = build_benchmark(task, {"type": task, "path": str(path)})
    with pytest.raises(DataError) as info:
        if task == "perplexity":
            bench.text()
        else:
            list(bench.examples())
    assert str(path) in str(info.value)


@pytest.mark.slow
def test_the_eval_command_line_says_it_in_one_line(tmp_path: Path, tiny_gpt2_dir: Path) -> None:
    path = tmp_path / "valid.txt"
    path.write_bytes(b"caf\xe9 au lait\n")  # latin-1
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "src.eval",
            f"pretrained={tiny_gpt2_dir}",
            "benchmarks=[perplexity]",
            f"benchmarks.perplexity.path={path}",
            f"hydra.run.dir={tmp_path / 'eval'}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HYDRA_FULL_ERROR": "0"},
    )
    assert r.returncode == 1, r.stderr[-2000:]
    assert (
        "DataError" in r.stderr
        and str(path) in r.stderr
        and "UTF-8" in r.stderr
        and "Traceback" not in r.stderr
    )
