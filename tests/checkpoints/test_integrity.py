"""Checkpoints carry a content hash checked on load; non-finite weights are refused on load as on
save; a real full disk (tmpfs) during torch's zip write is the catalogued CheckpointError."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from src.checkpoints.integrity import INTEGRITY, seal
from src.checkpoints.io import atomic_torch_save, safe_torch_load
from src.checkpoints.load import load_checkpoint
from src.errors import CheckpointError
from tests.faults import fill, mount_tmpfs, unmount
from tests.run_fixtures import REPO, TINY


@pytest.fixture(scope="module")
def trained(
    tmp_path_factory: pytest.TempPathFactory, procs: SimpleNamespace, token_cache: str
) -> Path:
    run = tmp_path_factory.mktemp("integrity") / "run"
    r = subprocess.run(
        [sys.executable, "-m", "src.train", *TINY, "trainer.max_steps=4", f"hydra.run.dir={run}"],
        cwd=REPO,
        env=procs.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return run / "checkpoints" / "last.ckpt"


def test_a_written_checkpoint_carries_its_hash_and_loads(trained: Path) -> None:
    ckpt = safe_torch_load(trained)
    assert len(ckpt[INTEGRITY]["sha256"]) == 64
    assert load_checkpoint(trained).global_step == 4


def test_a_flipped_bit_is_refused_on_load(trained: Path, tmp_path: Path) -> None:
    ckpt = torch.load(trained, weights_only=True)
    name, weight = max(ckpt["state_dict"].items(), key=lambda kv: kv[1].numel())
    raw = trained.read_bytes()
    # the tensor's bytes in the zip
    at = raw.find(weight.contiguous().view(torch.uint8).numpy().tobytes()[:64])
    assert at > 0
    damaged = bytearray(raw)
    damaged[at + 2] ^= 0x10  # one bit of one float of the largest weight
    copy = tmp_path / "last.ckpt"
    copy.write_bytes(bytes(damaged))
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(copy)
    assert str(copy) in str(info.value) and "content hash does not match" in str(info.value)


def test_nan_weights_are_refused_on_load(trained: Path, tmp_path: Path) -> None:
    ckpt = torch.load(trained, weights_only=True)
    name = next(k for k, v in ckpt["state_dict"].items() if v.is_floating_point())
    ckpt["state_dict"][name][0] = float("nan")
    copy = tmp_path / "nan.ckpt"
    torch.save(seal(ckpt), copy)  # a valid hash: only the finiteness check can refuse it
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(copy)
    assert name in str(info.value) and "NaN/inf" in str(info.value) and str(copy) in str(info.value)


def test_a_checkpoint_without_a_hash_loads_with_a_warning(
    trained: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ckpt = torch.load(trained, weights_only=True)
    del ckpt[INTEGRITY]
    copy = tmp_path / "old.ckpt"
    torch.save(ckpt, copy)
    assert load_checkpoint(copy).global_step == 4
    assert "carries no content hash" in caplog.text


def test_a_real_full_disk_in_torchs_zip_writer_is_a_checkpoint_error(
    trained: Path, tmp_path: Path
) -> None:
    disk = tmp_path / "disk"
    mount_tmpfs(disk, "200k")
    try:
        old = disk / "last.ckpt"
        state = torch.load(trained, weights_only=True)
        small = seal({"state_dict": {"w": torch.zeros(10)}})
        atomic_torch_save(small, old)
        # more than ~8 KB free: torch's writer fails with RuntimeError, not OSError
        fill(disk, leave=64 * 1024)
        with pytest.raises(CheckpointError) as info:
            atomic_torch_save(seal(state), old)  # ~300 kB
        assert str(old) in str(info.value) and "previous file at that path is kept" in str(
            info.value
        )
        assert torch.equal(safe_torch_load(old)["state_dict"]["w"], torch.zeros(10))
        assert sorted(p.name for p in disk.iterdir()) == ["fill", "last.ckpt"]
    finally:
        unmount(disk)
        shutil.rmtree(disk, ignore_errors=True)
