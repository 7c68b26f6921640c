"""Kill -9 a training run at three points, resume from last.ckpt each time, and end with exactly
the weights of an uninterrupted run; a sweep job that fails is recorded and the others run.

The tiny run (16 steps, validation + checkpoint every 4) is ``python -m src.train`` in a
subprocess. ``tests.faults`` pauses it at a chosen point and writes a marker file; the
test then sends SIGKILL, so each kill lands exactly where intended:

1. after optimizer step 6 (between checkpoints)               -> last.ckpt is step 4
2. while writing last.ckpt of step 12: the new file is complete
   under its temporary name but not yet renamed               -> last.ckpt is still step 8
3. at the start of the validation of step 16                   -> last.ckpt is step 12

then a fourth run finishes. After every kill every ``*.ckpt`` on disk loads with
``torch.load(weights_only=True)``. The uninterrupted reference is job 1 of a 2-job multirun
whose job 0 has a bad override (``model.n_head=5`` with d_model 32): it runs in parallel with the
killed runs and doubles as the sweep-failure test. All runs are single-threaded on CPU, where
the same seed gives bit-identical weights.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from src.checkpoints.io import safe_torch_load

FAULTS = "+callbacks.faults._target_=tests.faults.FaultInjector"
BAD_JOB_ERROR = (
    "ConfigError: model.d_model=32",
    "model.n_head=5",
    "divisors of d_model",
)  # type, key and value, fix


@pytest.fixture(scope="module")
def sweep(
    tmp_path_factory: pytest.TempPathFactory,
    procs: SimpleNamespace,
    tiny: tuple[str, ...],
    token_cache: str,
) -> SimpleNamespace:
    """Start ``-m model.n_head=5,4`` in the background (job 0 fails, job 1 is the reference run)."""
    root = tmp_path_factory.mktemp("sweep")
    args = [a for a in tiny if not a.startswith("model.n_head=")]
    log = root / "sweep.log"
    sweep_dir = [f"hydra.sweep.dir={root / 'jobs'}", "hydra.sweep.subdir=${hydra.job.num}"]
    proc = procs.start(["-m", *args, FAULTS, "model.n_head=5,4", *sweep_dir], log)
    return SimpleNamespace(proc=proc, log=log, jobs=root / "jobs")


def _finished(sweep: SimpleNamespace) -> SimpleNamespace:
    try:
        sweep.proc.wait(timeout=180)
    except subprocess.TimeoutExpired:
        sweep.proc.kill()
        pytest.fail(f"the sweep did not finish:\n{sweep.log.read_text()[-3000:]}")
    return sweep


def _load_all(ckpt_dir: Path) -> dict[str, dict[str, Any]]:
    """Every checkpoint on disk, loaded weights-only (raises if any is torn or unsafe)."""
    return {p.name: safe_torch_load(p) for p in sorted(ckpt_dir.glob("*.ckpt"))}


def test_sigkill_three_times_then_resume_equals_uninterrupted(
    tmp_path: Path, procs: SimpleNamespace, tiny: tuple[str, ...], sweep: SimpleNamespace
) -> None:
    run_dir, marker = tmp_path / "run", tmp_path / "marker.json"
    ckpts, last = run_dir / "checkpoints", run_dir / "checkpoints" / "last.ckpt"
    args = [*tiny, FAULTS, f"hydra.run.dir={run_dir}"]

    def kill_at(fault: str, *extra: str) -> dict[str, Any]:
        marker.unlink(missing_ok=True)
        log = tmp_path / f"{fault.split('=')[0]}.log"
        proc = procs.start([*args, *extra], log, TLAB_FAULTS=fault, TLAB_FAULT_MARKER=str(marker))
        procs.wait_for(marker, proc, log)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        return json.loads(marker.read_text())

    # 1. between checkpoints
    info = kill_at("pause_train_step=6")
    assert (info["what"], info["step"]) == ("train", 6)
    on_disk = _load_all(ckpts)
    assert on_disk["last.ckpt"]["global_step"] == 4

    # 2. inside the atomic save of last.ckpt: written and fsynced under .last.ckpt.<pid>.tmp, not renamed
    info = kill_at("pause_save=last.ckpt@12", f"ckpt_path={last}")
    assert (info["what"], info["step"]) == ("save last.ckpt", 12)
    on_disk = _load_all(ckpts)
    assert on_disk["last.ckpt"]["global_step"] == 8  # the old file, whole
    assert [p.name for p in ckpts.glob(".*.tmp")] == [f".last.ckpt.{info['pid']}.tmp"]

    # 3. during validation (before that validation's checkpoint)
    info = kill_at("pause_val_step=16", f"ckpt_path={last}")
    assert (info["what"], info["step"]) == ("validation", 16)
    on_disk = _load_all(ckpts)
    assert on_disk["last.ckpt"]["global_step"] == 12
    # the stale temporary file went with the next successful save
    assert not list(ckpts.glob(".*.tmp"))

    # 4. resume to the end
    log = tmp_path / "final.log"
    final = procs.start([*args, f"ckpt_path={last}"], log)
    assert final.wait(timeout=180) == 0, log.read_text()[-3000:]
    on_disk = _load_all(ckpts)
    resumed = on_disk["last.ckpt"]
    assert resumed["global_step"] == 16
    assert json.loads((run_dir / "metrics.json").read_text())["status"] == "completed"

    reference = safe_torch_load(_finished(sweep).jobs / "1" / "checkpoints" / "last.ckpt")
    assert reference["global_step"] == 16
    assert resumed["state_dict"].keys() == reference["state_dict"].keys()
    differ = [
        k
        for k, v in reference["state_dict"].items()
        if not torch.equal(v, resumed["state_dict"][k])
    ]
    assert not differ, f"weights differ from the uninterrupted run: {differ}"


def test_failed_sweep_job_is_recorded_and_the_others_run(sweep: SimpleNamespace) -> None:
    s = _finished(sweep)
    assert s.proc.returncode != 0  # Hydra reports the failed job once every job has run
    bad = json.loads((s.jobs / "0" / "metrics.json").read_text())
    start, *parts = BAD_JOB_ERROR
    assert bad["status"] == "failed" and bad["global_step"] == 0
    assert bad["error"].startswith(start) and all(p in bad["error"] for p in parts), bad["error"]
    good = json.loads((s.jobs / "1" / "metrics.json").read_text())
    assert good["status"] == "completed" and good["error"] is None and good["global_step"] == 16
