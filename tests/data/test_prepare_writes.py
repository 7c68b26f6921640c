"""src.prepare writes only into its output directory, and on a real full disk (a tmpfs) ends with
one line naming the file, leaving no temporary file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from src.data.shards import encode_sharded
from src.data.tokenizers import build_tokenizer
from src.errors import WriteError
from tests.faults import fill, mount_tmpfs, unmount

REPO = Path(__file__).resolve().parents[2]


def test_a_full_disk_is_one_line_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("hello world, this is a small corpus.\n" * 3000)
    disk = tmp_path / "disk"
    mount_tmpfs(disk, "400k")
    try:
        # past the output-dir probe (64 KiB), short of the tokens (~200 KB)
        fill(disk, leave=100 * 1024)
        env = {**__import__("os").environ, "HF_HUB_OFFLINE": "1", "HYDRA_FULL_ERROR": "0"}
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "src.prepare",
                "data=text",
                f"data.paths=[{corpus}]",
                "tokenizer=char",
                f"out_dir={disk / 'tok'}",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert r.returncode == 1
        assert "WriteError: could not write" in r.stderr and "bytes free there" in r.stderr
        assert "Traceback" not in r.stderr
        assert not [p for p in disk.rglob("*") if ".tmp" in p.name]
        assert not (disk / "tok" / "meta.json").exists()
    finally:
        unmount(disk)


def test_a_shards_link_out_of_the_output_directory_is_refused(tmp_path: Path) -> None:
    out, elsewhere = tmp_path / "tok", tmp_path / "elsewhere"
    out.mkdir()
    (elsewhere / "train").mkdir(parents=True)
    (elsewhere / "train" / "keep.txt").write_text("precious")
    (out / ".shards").symlink_to(elsewhere)
    tok = build_tokenizer({"name": "char"})
    with pytest.raises(WriteError, match="symlink"):
        encode_sharded(["abc"] * 4, tok, out / "train.bin", separate=False, desc="t", shard_docs=2)
    assert (elsewhere / "train" / "keep.txt").read_text() == "precious"
    assert sorted(p.name for p in (elsewhere / "train").iterdir()) == ["keep.txt"]
