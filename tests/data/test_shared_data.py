"""``python -m src.prepare shared-data`` (src/data/shared_data.py): the pinned checksums are those
of the files the project was measured with, a fetch verifies each file before it lands and resumes
after an interruption, and a bad download or no network is one line naming the file. No network:
the ``--mirror`` is a file:// copy (../shared itself when present, else files made here)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from src.data.shared_data import SETS, Remote, fetch, fetch_one, main
from src.errors import DataError

SHARED = Path(__file__).resolve().parents[3] / "shared"


@pytest.mark.skipif(not (SHARED / "data").is_dir(), reason="../shared is not here")
def test_the_pins_are_the_files_the_project_measured_with(tmp_path: Path) -> None:
    out = tmp_path / "shared"
    lines = fetch(out, mirror=SHARED.as_uri())
    assert len(lines) == sum(len(files) for files in SETS.values())
    assert all(line.startswith("fetched") for line in lines)
    for files in SETS.values():
        for r in files:
            assert (out / r.path).read_bytes() == (SHARED / r.path).read_bytes()
    # a second run keeps every file (checked, not downloaded again)
    assert all(line.startswith("kept") for line in fetch(out, mirror=SHARED.as_uri()))


def _remote(tmp_path: Path, content: bytes) -> tuple[Remote, Path]:
    src = tmp_path / "mirror" / "data" / "toy" / "toy.txt"
    src.parent.mkdir(parents=True)
    src.write_bytes(content)
    return Remote("data/toy/toy.txt", src.as_uri(), hashlib.sha256(b"pinned").hexdigest()), src


def test_a_file_that_is_not_the_pinned_one_is_not_written(tmp_path: Path) -> None:
    remote, _ = _remote(tmp_path, b"altered")
    out = tmp_path / "out"
    with pytest.raises(DataError) as e:
        fetch_one(remote, out)
    assert "not the pinned" in str(e.value) and "\n" not in str(e.value)
    assert not (out / remote.path).exists() and not list((out / "data" / "toy").glob("*"))


def test_no_network_names_the_file_and_the_checksum(tmp_path: Path) -> None:
    remote = Remote("data/toy/toy.txt", (tmp_path / "absent.txt").as_uri(), "0" * 64)
    with pytest.raises(DataError) as e:
        fetch_one(remote, tmp_path / "out")
    text = str(e.value)
    assert "could not download" in text and str(tmp_path / "out" / remote.path) in text
    assert "0" * 64 in text


def test_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--out", str(tmp_path), "--only", "tinyshakspeare"])
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert "no such set" in err and "tinyshakespeare" in err and len(err.strip().splitlines()) == 1
