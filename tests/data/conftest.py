"""Fixtures for the data tests: a private cache directory, the shared public data (when present)."""

from __future__ import annotations

from pathlib import Path

import pytest

# ../shared/data beside the checkout; tests that need it skip when it is absent
SHARED_DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


def shared(*parts: str) -> Path:
    """A path under the shared data folder, or skip the test."""
    p = SHARED_DATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"public data not present at {p}")
    return p


@pytest.fixture
def cache_dir(tmp_path: Path) -> str:
    """A fresh token/download cache for one test (never ~/.cache)."""
    return str(tmp_path / "cache")


@pytest.fixture
def small_text(tmp_path: Path) -> Path:
    """A small deterministic English-like text file (~20 k characters)."""
    words = "the quick brown fox jumps over a lazy dog while seven wise owls watch quietly".split()
    lines = [" ".join(words[(i * 7 + j) % len(words)] for j in range(10)) + "." for i in range(400)]
    p = tmp_path / "small.txt"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def write_gz_lines(path: Path, lines: list[str]) -> Path:
    import gzip

    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode("utf-8")))
    return path


@pytest.fixture
def tiny_multi30k(tmp_path: Path) -> Path:
    """A Multi30k-shaped folder (train 40 / val 9 / test 7 pairs) of synthetic sentences."""
    folder = tmp_path / "m30k"
    folder.mkdir()
    en = "a man rides a red bike down the busy street".split()
    de = "ein Mann fährt ein rotes Fahrrad die belebte Straße hinunter".split()
    for split, n in (("train", 40), ("val", 9), ("test_2016_flickr", 7)):
        write_gz_lines(
            folder / f"{split}.en.gz",
            [" ".join(en[: 2 + (i * 3) % 8]) + f" {split} {i}." for i in range(n)],
        )
        write_gz_lines(
            folder / f"{split}.de.gz",
            [" ".join(de[: 2 + (i * 5) % 9]) + f" {split} {i}." for i in range(n)],
        )
    return folder
