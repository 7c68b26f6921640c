"""``python -m src.prepare`` on a corpus in FineWeb-Edu's format (parquet, a ``text`` column beside
metadata columns): several processes, shards, byte-identical to one process, and a killed run
resumes from the shards it had written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from src.data import shards
from src.data.cache import encode_split
from src.data.tokenizers import build_tokenizer

N_DOCS = 60


@pytest.fixture
def fineweb_like(tmp_path: Path) -> Path:
    """60 documents as FineWeb-Edu's parquet rows (text, id, url, score, ...)."""
    import datasets

    rng = np.random.default_rng(0)
    words = "the river of education learning science history students teachers school water".split()
    rows = [
        {
            "text": " ".join(rng.choice(words, size=int(rng.integers(5, 40)))) + ".",
            "id": f"<urn:{i}>",
            "dump": "CC-MAIN-2024-10",
            "url": f"https://example.org/{i}",
            "score": float(rng.uniform(2.5, 5)),
        }
        for i in range(N_DOCS)
    ]
    path = tmp_path / "fineweb_edu_sample.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(path))
    return path


def _dataset(path: Path) -> Any:
    import datasets

    return datasets.load_dataset(
        "parquet", data_files=str(path), split="train", cache_dir=str(path.parent / "hf")
    )


def test_sharded_equals_one_process_and_resumes(
    fineweb_like: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds, tok = _dataset(fineweb_like), build_tokenizer({"name": "gpt2"})
    ref = tmp_path / "ref" / "train.bin"
    ref.parent.mkdir()
    n_ref = encode_split(ds, tok, ref, separate=True, desc="ref", num_proc=1)

    # two processes, shards of 7 documents: the same bytes, shards cleaned up
    out = tmp_path / "sharded" / "train.bin"
    out.parent.mkdir()
    assert (
        shards.encode_sharded(ds, tok, out, separate=True, desc="t", num_proc=2, shard_docs=7)
        == n_ref
    )
    assert out.read_bytes() == ref.read_bytes()
    assert not (out.parent / shards.SHARDS).exists()

    # a run killed at shard 4 keeps shards 0-3; the next run encodes only 4-8
    out2 = tmp_path / "resumed" / "train.bin"
    out2.parent.mkdir()
    encoded: list[int] = []
    real = shards._encode_shard

    def dies_at_4(task: tuple[int, int, int, str]) -> tuple[int, int, int]:
        if task[0] == 4:
            raise KeyboardInterrupt  # the process is stopped here
        encoded.append(task[0])
        return real(task)

    monkeypatch.setattr(shards, "_encode_shard", dies_at_4)
    with pytest.raises(KeyboardInterrupt):
        shards.encode_sharded(ds, tok, out2, separate=True, desc="t", num_proc=1, shard_docs=7)
    kept = sorted(p.name for p in shards.shard_dir(out2).glob("*.bin"))
    assert kept == ["00000.bin", "00001.bin", "00002.bin", "00003.bin"] and not out2.exists()
    encoded.clear()
    monkeypatch.setattr(
        shards, "_encode_shard", lambda task: (encoded.append(task[0]), real(task))[1]
    )
    assert (
        shards.encode_sharded(ds, tok, out2, separate=True, desc="t", num_proc=1, shard_docs=7)
        == n_ref
    )
    assert encoded == [4, 5, 6, 7, 8]
    assert out2.read_bytes() == ref.read_bytes()

    # shards of another plan (here another shard size) are not mixed in: it starts over
    monkeypatch.setattr(shards, "_encode_shard", dies_at_4)
    with pytest.raises(KeyboardInterrupt):
        shards.encode_sharded(ds, tok, out2, separate=True, desc="t", num_proc=1, shard_docs=7)
    encoded.clear()
    monkeypatch.setattr(
        shards, "_encode_shard", lambda task: (encoded.append(task[0]), real(task))[1]
    )
    shards.encode_sharded(ds, tok, out2, separate=True, desc="t", num_proc=1, shard_docs=10)
    assert encoded == list(range(6)) and out2.read_bytes() == ref.read_bytes()


def test_prepare_command_on_a_fineweb_format_file(
    fineweb_like: Path, tmp_path: Path, run_entry_point: Any
) -> None:
    out = tmp_path / "fineweb"
    r = run_entry_point(
        "src.prepare",
        [
            "data=fineweb_edu",
            f"data.dir={out}",
            "data.raw.path=parquet",
            f"+data.raw.data_files={fineweb_like}",
            "~data.raw.config",
            "data.raw.val_fraction=0.1",
            "num_proc=2",
            "shard_docs=8",
        ],
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    # the last line says where it went
    assert r.stdout.strip().splitlines()[-1].startswith(f"prepared: {out}")
    meta = json.loads((out / "meta.json").read_text())
    assert meta["tokens"]["train"] > 0 and meta["tokens"]["val"] > 0 and meta["dtype"] == "uint16"
    assert {p.name for p in out.iterdir()} == {"train.bin", "val.bin", "test.bin", "meta.json"}
    train = np.fromfile(out / "train.bin", dtype=np.uint16)
    tok = build_tokenizer({"name": "gpt2"})
    # one eos per training document: 6 validate, then test_fraction 0.0005 of the other 54 rounds up to 1
    assert (train == tok.eos_token_id).sum() == int(round(N_DOCS * 0.9)) - 1
    assert "tokenizing" in r.stderr  # the progress bar
