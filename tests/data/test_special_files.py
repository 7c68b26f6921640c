"""Issue 21 item 14: a FIFO or a device given as a data file used to be called "no such file" (and reading
one would block or never end); it is now named for what it is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from src.data.sources import build_source
from src.errors import DataError


@pytest.mark.parametrize("kind", ["fifo", "device"])
@pytest.mark.parametrize("source", ["text", "tinyshakespeare"])
def test_a_fifo_or_device_as_data_path_is_named(tmp_path: Path, kind: str, source: str) -> None:
    if kind == "fifo":
        path = tmp_path / "corpus.txt"
        os.mkfifo(path)
        what = "a FIFO (named pipe), not a regular file"
    else:
        path, what = Path("/dev/zero"), "a character device, not a regular file"
    with pytest.raises(DataError) as info:
        build_source({"name": source, "path": str(path), "cache_dir": str(tmp_path / "c")}).splits()
    assert f"data.path='{path}'" in str(info.value) and what in str(info.value)
