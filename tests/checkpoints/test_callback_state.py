"""Paths in a checkpoint's callback state act only inside the run's checkpoint directory: an edited
last.ckpt cannot have a file outside the run deleted, and a moved run directory resumes (real
src.train processes, a real edited checkpoint, a real moved directory)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from src.checkpoints.callback_state import confine_callback_paths
from src.checkpoints.integrity import seal
from src.jsonfile import read_json
from tests.run_fixtures import REPO, TINY


def train(run: Path, procs: SimpleNamespace, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "src.train", *TINY, f"hydra.run.dir={run}", *more],
        cwd=REPO,
        env=procs.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_unit_paths_outside_the_directory_are_dropped_and_moved_ones_follow(tmp_path: Path) -> None:
    here = tmp_path / "new" / "checkpoints"
    here.mkdir(parents=True)
    (here / "best-000008.ckpt").write_bytes(b"x")
    (here / "last.ckpt").write_bytes(b"x")
    (here / "link.ckpt").symlink_to(tmp_path / "victim.txt")
    old = "/gone/run/checkpoints"
    state = {
        "dirpath": old,
        "best_k_models": {
            f"{old}/best-000008.ckpt": 3.0,
            f"{old}/../../../victim.txt": 9.0,
            f"{old}/link.ckpt": 8.0,
        },
        "best_model_path": f"{old}/best-000008.ckpt",
        "kth_best_model_path": f"{old}/../../../victim.txt",
        "last_model_path": f"{old}/last.ckpt",
        "best_model_score": 3.0,
        "kth_value": 9.0,
    }
    dropped = confine_callback_paths(state, here)
    assert state["best_k_models"] == {str(here / "best-000008.ckpt"): 3.0}
    assert (
        state["best_model_path"] == str(here / "best-000008.ckpt")
        and state["kth_best_model_path"] == ""
    )
    assert state["last_model_path"] == str(here / "last.ckpt") and state["dirpath"] == str(here)
    assert f"{old}/../../../victim.txt" in dropped and f"{old}/link.ckpt" in dropped


def test_an_edited_checkpoint_cannot_delete_a_file_outside_the_run(
    tmp_path: Path, procs: SimpleNamespace, token_cache: str
) -> None:
    run = tmp_path / "runs" / "a"
    r = train(run, procs, "trainer.max_steps=8")
    assert r.returncode == 0, r.stderr[-2000:]
    victim = tmp_path / "victim.txt"  # <run>/checkpoints/../../../victim.txt
    victim.write_text("precious")
    last = run / "checkpoints" / "last.ckpt"
    ckpt = torch.load(last, weights_only=True)
    key, state = next((k, v) for k, v in ckpt["callbacks"].items() if "best_k_models" in v)
    crafted = f"{state['dirpath']}/../../../victim.txt"
    assert Path(crafted).resolve() == victim.resolve()
    # worse than any real val/loss: Lightning deletes it when a better one comes
    worse = torch.tensor(99.0)
    state.update(
        best_k_models={crafted: worse},
        kth_best_model_path=crafted,
        kth_value=worse,
        best_model_path=crafted,
        best_model_score=worse,
    )
    torch.save(seal(ckpt), last)  # a valid content hash: only the confinement stands in the way
    r = train(run, procs, f"ckpt_path={last}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert victim.read_text() == "precious"
    assert "dropped 1 path(s)" in r.stdout + r.stderr


@pytest.mark.slow
def test_a_moved_run_directory_resumes_and_tests(
    tmp_path: Path, procs: SimpleNamespace, token_cache: str
) -> None:
    first, moved = tmp_path / "first", tmp_path / "elsewhere" / "moved"
    r = train(first, procs, "trainer.max_steps=8", "test=true")
    assert r.returncode == 0, r.stderr[-2000:]
    moved.parent.mkdir()
    shutil.move(str(first), str(moved))
    r = train(moved, procs, "test=true", f"ckpt_path={moved / 'checkpoints' / 'last.ckpt'}")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    metrics = read_json(moved / "metrics.json") or {}
    assert (
        metrics["status"] == "completed"
        and metrics["global_step"] == 16
        and metrics.get("test/loss") is not None
    )
    names = sorted(p.name for p in (moved / "checkpoints").iterdir())
    # continued in place, no second series
    assert "last.ckpt" in names and not [n for n in names if "-v1" in n]
    # the top-1 record survived the move
    assert len([n for n in names if n.startswith("best-")]) == 1
    assert not first.exists()
