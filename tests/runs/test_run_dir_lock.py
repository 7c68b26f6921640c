"""The run directory: locked before Hydra writes .hydra/ into it (two real concurrent src.train
processes), never shared by a second new run, and a full disk found before Hydra's own write."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from src.errors import ConfigError
from src.runs.output_dir import check_output_dir
from tests.faults import fill, mount_tmpfs, unmount
from tests.run_fixtures import REPO, TINY

FAULTS = "+callbacks.faults._target_=tests.faults.FaultInjector"


def hydra_files(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((run / ".hydra").iterdir())}


def test_a_second_run_in_a_held_directory_stops_before_hydra_writes(
    tmp_path: Path, procs: SimpleNamespace, token_cache: str
) -> None:
    run, marker = tmp_path / "run", tmp_path / "paused.json"
    first = procs.start(
        [*TINY, f"hydra.run.dir={run}", FAULTS],
        tmp_path / "first.log",
        TLAB_FAULTS="pause_train_step=2",
        TLAB_FAULT_MARKER=str(marker),
    )
    try:
        procs.wait_for(marker, first, tmp_path / "first.log")
        saved = hydra_files(run)
        second = subprocess.run(
            [sys.executable, "-m", "src.train", *TINY, "optim.lr=1e-3", f"hydra.run.dir={run}"],
            cwd=REPO,
            env=procs.env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert second.returncode == 1
        assert (
            f"{run} is in use by another running job" in second.stderr
            and "Traceback" not in second.stderr
        )
        assert hydra_files(run) == saved  # the first run's saved config and overrides are its own
        marker.unlink()  # ends the pause
        assert first.wait(timeout=300) == 0, (tmp_path / "first.log").read_text()[-2000:]
    finally:
        if first.poll() is None:
            first.kill()
    assert hydra_files(run) == saved
    assert b"optim.lr=1e-3" not in saved["overrides.yaml"]


def test_a_new_run_refuses_a_directory_holding_a_run(
    tmp_path: Path, procs: SimpleNamespace, token_cache: str
) -> None:
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "src.train", *TINY, "trainer.max_steps=4", f"hydra.run.dir={run}"]
    assert (
        subprocess.run(cmd, cwd=REPO, env=procs.env(), capture_output=True, timeout=300).returncode
        == 0
    )
    saved = hydra_files(run)
    before = sorted(p.relative_to(run) for p in run.rglob("*") if p.suffix != ".log")
    r = subprocess.run(
        [*cmd, "optim.lr=1e-3"],
        cwd=REPO,
        env=procs.env(HYDRA_FULL_ERROR="0"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"hydra.run.dir={run} already holds a run" in r.stderr
    # the fix: resume, or another directory
    assert f"ckpt_path={run / 'checkpoints' / 'last.ckpt'}" in r.stderr
    assert hydra_files(run) == saved  # Hydra's write of the refused run's config was undone
    # no last-v1, no version_1
    assert sorted(p.relative_to(run) for p in run.rglob("*") if p.suffix != ".log") == before
    r = subprocess.run(
        [*cmd, "trainer.max_steps=6", f"ckpt_path={run / 'checkpoints' / 'last.ckpt'}"],
        cwd=REPO,
        env=procs.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]  # a resume continues the run in place
    assert not list((run / "checkpoints").glob("*-v1.ckpt"))


def test_a_full_disk_is_found_before_hydra_writes_its_config(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    mount_tmpfs(disk, "200k")
    try:
        fill(disk, leave=1024)  # room for Hydra's empty files but not for their contents
        with pytest.raises(ConfigError) as info:
            check_output_dir(disk / "run", "hydra.run.dir")
        assert "hydra.run.dir=" in str(info.value) and "No space left on device" in str(info.value)
        assert not [p for p in (disk / "run").iterdir()]
    finally:
        unmount(disk)


@pytest.mark.slow
def test_a_sweep_job_refused_after_hydras_write_leaves_the_runs_config_as_it_was(
    tmp_path: Path, procs: SimpleNamespace, token_cache: str
) -> None:
    """A sweep job learns its directory only after Hydra wrote .hydra/ into it: the running job that holds
    the directory writes its own files back when it ends."""
    run, marker = tmp_path / "run", tmp_path / "paused.json"
    first = procs.start(
        [*TINY, f"hydra.run.dir={run}", FAULTS],
        tmp_path / "first.log",
        TLAB_FAULTS="pause_train_step=2",
        TLAB_FAULT_MARKER=str(marker),
    )
    try:
        procs.wait_for(marker, first, tmp_path / "first.log")
        saved = hydra_files(run)
        sweep = subprocess.run(
            [
                sys.executable,
                "-m",
                "src.train",
                "-m",
                *TINY,
                "optim.lr=1e-3",
                f"hydra.sweep.dir={tmp_path}",
                "hydra.sweep.subdir=run",
            ],
            cwd=REPO,
            env=procs.env(HYDRA_FULL_ERROR="0"),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert sweep.returncode != 0 and f"{run} is in use by another running job" in sweep.stderr
        # Hydra wrote the sweep job's files before any lock could be taken
        assert hydra_files(run) != saved
        marker.unlink()
        assert first.wait(timeout=300) == 0, (tmp_path / "first.log").read_text()[-2000:]
    finally:
        if first.poll() is None:
            first.kill()
    assert hydra_files(run) == saved  # put back by the run that held the directory
