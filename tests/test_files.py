"""src/files.py, the one writer: atomic, never through a symlink out of its output directory, a full
disk a clear WriteError (a real tmpfs; skipped where mounting is not permitted)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from src.errors import WriteError
from src.files import atomic_path, atomic_write
from tests.faults import fill, mount_tmpfs, unmount


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "small"
    mount_tmpfs(where, "200k")
    yield where
    unmount(where)


def test_a_symlink_at_the_destination_is_replaced_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("VICTIM")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").symlink_to(victim)
    atomic_write(out / "report.md", "new report\n", root=out)
    assert victim.read_text() == "VICTIM"
    assert (
        not (out / "report.md").is_symlink() and (out / "report.md").read_text() == "new report\n"
    )


def test_a_link_planted_under_the_temporary_name_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("VICTIM")
    out = tmp_path / "out"
    out.mkdir()
    # the name a writer of runs.csv in this process uses
    (out / f".runs.csv.{os.getpid()}.tmp").symlink_to(victim)
    atomic_write(out / "runs.csv", "a,b\n", root=out)
    assert victim.read_text() == "VICTIM"
    assert (out / "runs.csv").read_text() == "a,b\n"
    assert sorted(p.name for p in out.iterdir()) == ["runs.csv"]


def test_a_symlinked_directory_out_of_the_output_directory_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "plots").symlink_to(elsewhere)
    with pytest.raises(WriteError) as info:
        atomic_write(out / "plots" / "sub" / "loss.png", b"png", root=out)
    assert "plots is a symlink to" in str(info.value) and "remove the link" in str(info.value)
    assert list(elsewhere.iterdir()) == []  # not even the sub-directory was created there
    (out / "inside").mkdir()
    (out / "alias").symlink_to(out / "inside")  # a link that stays inside is fine
    atomic_write(out / "alias" / "x.txt", "x", root=out)
    assert (out / "inside" / "x.txt").read_text() == "x"


def test_a_full_disk_is_a_write_error_and_the_old_file_stays_whole(tmpfs: Path) -> None:
    dest = tmpfs / "report.md"
    dest.write_text("# the old report\n")
    fill(tmpfs)
    with pytest.raises(WriteError) as info:
        atomic_write(dest, "x" * 100_000)
    assert "No space left on device" in str(info.value) and str(dest) in str(info.value)
    assert dest.read_text() == "# the old report\n"
    assert not [p for p in tmpfs.iterdir() if ".tmp" in p.name]


def test_a_short_write_without_errno_is_a_write_error(tmpfs: Path) -> None:
    """numpy's tofile on a full disk raises OSError('… requested and … written') with no errno."""
    import numpy as np

    fill(tmpfs, leave=8192)
    with pytest.raises(WriteError, match="requested and"):
        with atomic_path(tmpfs / "train.bin") as tmp:
            np.zeros(200_000, dtype=np.uint16).tofile(tmp)
    assert not [p for p in tmpfs.iterdir() if p.name != "fill"]


def test_the_callers_own_os_error_passes_unchanged(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        with atomic_path(tmp_path / "out.bin") as tmp:
            tmp.write_bytes((tmp_path / "missing-input").read_bytes())
    assert list(tmp_path.iterdir()) == []
