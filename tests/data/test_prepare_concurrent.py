"""Issue 21 item 14: two ``python -m src.prepare`` into one directory at once used to share one ``.shards``
folder and remove each other's shards (a raw ``FileNotFoundError`` in one, a corpus of mixed shards at
worst); now the second stops at once with one line naming the directory, and writes nothing. Two real
processes; the lock goes with its process, even a killed one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from src.data.cache import read_meta

REPO = Path(__file__).resolve().parents[2]


def _prepare(out: Path, text: Path, cache: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "src.prepare",
            "data=bin",
            f"data.dir={out}",
            f"data.raw={{name:text,paths:[{text}]}}",
            f"data.cache_dir={cache}",
            "num_proc=1",
            "shard_docs=200",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HYDRA_FULL_ERROR": "0", "HF_HUB_OFFLINE": "1"},
    )


HOLD = """
import sys, time
from pathlib import Path
from src.prepare import one_writer
with one_writer(Path(sys.argv[1]), "data.dir"):
    Path(sys.argv[2]).write_text("held")
    time.sleep(60)
"""


@pytest.mark.slow
def test_a_second_prepare_into_the_same_directory_stops_at_once(tmp_path: Path) -> None:
    words = "the quick brown fox jumps over a lazy dog while seven wise owls watch quietly".split()
    text = tmp_path / "big.txt"
    text.write_text(
        "\n".join(
            " ".join(words[(i * 7 + j) % len(words)] for j in range(10)) + "." for i in range(2000)
        )
    )
    out, marker = tmp_path / "prepared", tmp_path / "held"
    # the first writer: a process inside src.prepare's own one_writer (a real prepare finishes this corpus in a
    # blink, before a second could start); the second: a real python -m src.prepare
    first = subprocess.Popen([sys.executable, "-c", HOLD, str(out), str(marker)], cwd=REPO)
    try:
        t0 = time.monotonic()
        while not marker.exists():
            assert first.poll() is None and time.monotonic() - t0 < 60
            time.sleep(0.02)
        second = _prepare(out, text, tmp_path / "cache")
        _, err = second.communicate(timeout=120)
        assert second.returncode == 1 and "Traceback" not in err, err[-2000:]
        assert f"data.dir={out} is being prepared by another python -m src.prepare" in err
        assert read_meta(out) is None and not (out / ".shards").exists()  # it wrote nothing
    finally:
        first.kill()
        first.wait()
    again = _prepare(out, text, tmp_path / "cache")  # the lock went with the killed writer
    _, err = again.communicate(timeout=300)
    assert again.returncode == 0, err[-2000:]
    meta = read_meta(out)
    assert (
        meta is not None
        and len(np.fromfile(out / "train.bin", dtype=np.uint16)) == meta["tokens"]["train"]
    )
