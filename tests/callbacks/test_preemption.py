"""Preemption: SIGTERM, and SLURM's pre-timeout signal under Lightning's SLURMEnvironment with
auto-requeue, write a resumable last.ckpt at the current step; resuming from it gives exactly the
weights and the logged curves of an uninterrupted run; a preempted sweep job is resumed, not
restarted, by ``sweep_resume.incomplete=last``.

The tiny 16-step run (validation every 4 steps on 2 batches) is ``python -m src.train`` in a
subprocess, paused by ``tests.faults`` at a chosen point; the test sends the signal,
then deletes the marker file so the run goes on and meets the signal at the next step boundary.
The uninterrupted reference runs in the background meanwhile. CPU, one thread, same seed:
bit-identical weights.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import stat
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from src.checkpoints.io import safe_torch_load

FAULTS = "+callbacks.faults._target_=tests.faults.FaultInjector"
SLURM = {
    "SLURM_NTASKS": "1",
    "SLURM_JOB_NAME": "train",
    "SLURM_JOB_ID": "4242",
    "SLURM_PROCID": "0",
    "SLURM_LOCALID": "0",
    "SLURM_NODEID": "0",
    "SLURM_NODELIST": "localhost",
}


def _args(tiny: tuple[str, ...], *drop: str) -> list[str]:
    keep = [a for a in tiny if not a.startswith(("trainer.limit_val_batches=", *drop))]
    return [*keep, "trainer.limit_val_batches=2", FAULTS]


@pytest.fixture(scope="module")
def reference(
    tmp_path_factory: pytest.TempPathFactory,
    procs: SimpleNamespace,
    tiny: tuple[str, ...],
    token_cache: str,
) -> SimpleNamespace:
    """The uninterrupted run, started in the background."""
    root = tmp_path_factory.mktemp("reference")
    log = root / "run.log"
    proc = procs.start([*_args(tiny), f"hydra.run.dir={root / 'run'}"], log)
    return SimpleNamespace(proc=proc, log=log, dir=root / "run")


def _done(ref: SimpleNamespace) -> Path:
    try:
        assert ref.proc.wait(timeout=300) == 0, ref.log.read_text()[-3000:]
    except subprocess.TimeoutExpired:
        ref.proc.kill()
        pytest.fail(f"the reference run did not finish:\n{ref.log.read_text()[-3000:]}")
    return ref.dir


def _signal_at(
    procs: SimpleNamespace,
    args: list[str],
    log: Path,
    marker: Path,
    fault: str,
    sig: int,
    **env: str,
) -> tuple[subprocess.CompletedProcess[bytes] | Any, dict[str, Any]]:
    """Run until the fault point, send ``sig``, let the run go on; returns (process, marker info)."""
    marker.unlink(missing_ok=True)
    proc = procs.start(
        args, log, TLAB_FAULTS=fault, TLAB_FAULT_MARKER=str(marker), HYDRA_FULL_ERROR="0", **env
    )
    procs.wait_for(marker, proc, log)
    info = json.loads(marker.read_text())
    os.kill(proc.pid, sig)
    marker.unlink()  # ends the pause: the run meets the signal at the next step boundary
    try:
        proc.wait(timeout=180)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"the run did not stop after the signal:\n{log.read_text()[-3000:]}")
    return proc, info


def _curves(run_dir: Path) -> dict[str, dict[int, str]]:
    """{metric: {step: logged text}} of train/loss and val/loss over every CSV log of the run."""
    out: dict[str, dict[int, str]] = {"train/loss": {}, "val/loss": {}}
    for f in sorted(run_dir.glob("csv/*/metrics.csv")):
        with open(f) as fh:
            for row in csv.DictReader(fh):
                for key in out:
                    if row.get(key):
                        out[key][int(row["step"])] = row[key]
    return out


def _same_weights(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    assert a["state_dict"].keys() == b["state_dict"].keys()
    return [k for k, v in a["state_dict"].items() if not torch.equal(v, b["state_dict"][k])]


def _fake_scontrol(folder: Path) -> Path:
    """An ``scontrol`` on PATH that records its arguments (Lightning calls ``scontrol requeue <job id>``)."""
    folder.mkdir()
    calls = folder / "calls.txt"
    script = folder / "scontrol"
    script.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return calls


def test_sigterm_slurm_signal_and_validation_then_resume_equals_uninterrupted(
    tmp_path: Path, procs: SimpleNamespace, tiny: tuple[str, ...], reference: SimpleNamespace
) -> None:
    run_dir, marker = tmp_path / "run", tmp_path / "marker.json"
    last = run_dir / "checkpoints" / "last.ckpt"
    args = [*_args(tiny), f"hydra.run.dir={run_dir}"]

    # 1. SIGTERM after optimizer step 6 (no checkpoint since step 4): last.ckpt of step 6, exit 128+15
    proc, info = _signal_at(
        procs, args, tmp_path / "1.log", marker, "pause_train_step=6", signal.SIGTERM
    )
    log = (tmp_path / "1.log").read_text()
    assert proc.returncode == 128 + signal.SIGTERM, log[-3000:]
    # one line: the signal, the step, the checkpoint, how to resume
    message = log.rstrip().splitlines()[-1]
    assert (
        message.startswith(f"preempted by SIGTERM at step 6: wrote {last}")
        and "Traceback" not in log
    )
    assert f"Resume with ckpt_path={last}" in message and "sweep_resume.incomplete=last" in message
    assert safe_torch_load(last)["global_step"] == 6
    record = json.loads((run_dir / "metrics.json").read_text())
    assert (
        record["status"] == "failed"
        and record["error"] == f"Preempted: {message}"
        and record["global_step"] == 6
    )

    # 2. under SLURM (Lightning's SLURMEnvironment, auto-requeue) the pre-timeout SIGUSR1 after step 10:
    #    last.ckpt and Lightning's hpc_ckpt_1.ckpt both of step 10, then `scontrol requeue 4242`
    calls = _fake_scontrol(tmp_path / "bin")
    slurm = {**SLURM, "PATH": f"{calls.parent}{os.pathsep}{os.environ['PATH']}"}
    proc, _ = _signal_at(
        procs,
        [*args, f"ckpt_path={last}"],
        tmp_path / "2.log",
        marker,
        "pause_train_step=10",
        signal.SIGUSR1,
        **slurm,
    )
    assert proc.returncode == 128 + signal.SIGUSR1, (tmp_path / "2.log").read_text()[-3000:]
    assert safe_torch_load(last)["global_step"] == 10
    assert safe_torch_load(run_dir / "hpc_ckpt_1.ckpt")["global_step"] == 10
    assert calls.read_text().split() == ["requeue", "4242"]

    # 3. SIGTERM at the start of the validation of step 12: that validation still runs whole, then last.ckpt
    proc, info = _signal_at(
        procs,
        [*args, f"ckpt_path={last}"],
        tmp_path / "3.log",
        marker,
        "pause_val_step=12",
        signal.SIGTERM,
    )
    assert (info["what"], proc.returncode) == ("validation", 128 + signal.SIGTERM), (
        tmp_path / "3.log"
    ).read_text()[-3000:]
    assert safe_torch_load(last)["global_step"] == 12

    # 4. resume to the end
    final = procs.start([*args, f"ckpt_path={last}"], tmp_path / "4.log")
    assert final.wait(timeout=180) == 0, (tmp_path / "4.log").read_text()[-3000:]
    assert json.loads((run_dir / "metrics.json").read_text())["status"] == "completed"

    ref_dir = _done(reference)
    resumed, ref = safe_torch_load(last), safe_torch_load(ref_dir / "checkpoints" / "last.ckpt")
    assert resumed["global_step"] == ref["global_step"] == 16
    assert not _same_weights(ref, resumed), "weights differ from the uninterrupted run"
    got, want = _curves(run_dir), _curves(ref_dir)
    # every step logged once, at the same step, same values
    assert len(want["val/loss"]) == 4 and got == want


def test_sigterm_mid_step_abandons_it_and_resume_equals_uninterrupted(
    tmp_path: Path, procs: SimpleNamespace, tiny: tuple[str, ...], reference: SimpleNamespace
) -> None:
    """A step slower than ``reliability.abandon_step_after_s`` (0 here: every step) stops at its next
    block on SIGTERM, mid-backward, and the checkpoint of the step before it is written; resuming
    does that step again and ends with the weights and curves of the uninterrupted run."""
    run_dir, marker = tmp_path / "run", tmp_path / "marker.json"
    last = run_dir / "checkpoints" / "last.ckpt"
    args = [*_args(tiny), "reliability.abandon_step_after_s=0", f"hydra.run.dir={run_dir}"]

    # the first step of a fresh run: abandoned, nothing to write
    proc, info = _signal_at(
        procs,
        [*args[:-1], f"hydra.run.dir={tmp_path / 'first'}"],
        tmp_path / "0.log",
        marker,
        "pause_backward_step=0",
        signal.SIGTERM,
    )
    log = (tmp_path / "0.log").read_text()
    assert (info["what"], proc.returncode) == ("backward", 128 + signal.SIGTERM), log[-3000:]
    assert (
        log.rstrip()
        .splitlines()[-1]
        .startswith(
            "preempted by SIGTERM at step 0, during step 1 (abandoned): no step had finished"
        )
    )
    assert not (tmp_path / "first" / "checkpoints" / "last.ckpt").exists()

    # step 7, after its forward (its loss computed, the backward about to start): abandoned, and
    # last.ckpt is that of step 6 (step 4's validation was the last checkpoint on disk)
    proc, info = _signal_at(
        procs, args, tmp_path / "1.log", marker, "pause_backward_step=6", signal.SIGTERM
    )
    log = (tmp_path / "1.log").read_text()
    assert (info["what"], proc.returncode) == ("backward", 128 + signal.SIGTERM), log[-3000:]
    message = log.rstrip().splitlines()[-1]
    assert message.startswith(
        "preempted by SIGTERM at step 6, during step 7 (abandoned; "
        f"reliability.abandon_step_after_s): wrote {last}, a resumable checkpoint of step 6"
    ), message
    assert "Traceback" not in log and f"Resume with ckpt_path={last}" in message
    assert safe_torch_load(last)["global_step"] == 6

    final = procs.start([*args, f"ckpt_path={last}"], tmp_path / "2.log")
    assert final.wait(timeout=180) == 0, (tmp_path / "2.log").read_text()[-3000:]
    ref_dir = _done(reference)
    resumed, ref = safe_torch_load(last), safe_torch_load(ref_dir / "checkpoints" / "last.ckpt")
    assert resumed["global_step"] == ref["global_step"] == 16
    assert not _same_weights(ref, resumed), "weights differ from the uninterrupted run"
    assert _curves(run_dir) == _curves(ref_dir)


def test_preempted_sweep_job_is_resumed_not_restarted(
    tmp_path: Path, procs: SimpleNamespace, tiny: tuple[str, ...], reference: SimpleNamespace
) -> None:
    jobs = tmp_path / "jobs"
    sweep = [
        "-m",
        *_args(tiny, "trainer.max_steps="),
        "trainer.max_steps=16,4",
        f"hydra.sweep.dir={jobs}",
        "hydra.sweep.subdir=${hydra.job.num}",
        "sweep_resume.skip_completed=true",
        "sweep_resume.incomplete=last",
    ]
    marker = tmp_path / "marker.json"
    proc, _ = _signal_at(
        procs, sweep, tmp_path / "1.log", marker, "pause_train_step=6", signal.SIGTERM
    )
    assert proc.returncode == 128 + signal.SIGTERM, (tmp_path / "1.log").read_text()[-3000:]
    last = jobs / "0" / "checkpoints" / "last.ckpt"
    assert safe_torch_load(last)["global_step"] == 6
    assert not (jobs / "1" / "metrics.json").exists()  # the sweep stopped with its job

    log = tmp_path / "2.log"
    again = procs.start(sweep, log)
    assert again.wait(timeout=300) == 0, log.read_text()[-3000:]
    text = log.read_text()
    # resumed, not restarted
    assert f"continuing from {last}" in text and not (jobs / "0" / "attempts").exists()
    assert json.loads((jobs / "0" / ".sweep_job.json").read_text())["attempt"] == 2
    for job in ("0", "1"):
        assert json.loads((jobs / job / "metrics.json").read_text())["status"] == "completed"
    resumed, ref = (
        safe_torch_load(last),
        safe_torch_load(_done(reference) / "checkpoints" / "last.ckpt"),
    )
    assert resumed["global_step"] == 16 and not _same_weights(ref, resumed)
