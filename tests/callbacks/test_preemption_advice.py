"""Issue 21 item 6: the preempted run's advice for a sweep re-run keeps each job's directory.

A study's jobs live in ``${sweep_subdir:${hydra.job.override_dirname}}``; the advice adds
``sweep_resume.*`` overrides, which used to become part of every directory name, so the re-run
started every job from scratch in new directories and the report counted both sets. The test
runs a real two-job sweep in a subprocess, preempts its first job with SIGTERM, re-runs the sweep
with exactly the overrides the message advises, and checks the job continued in its directory.
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest

from src.checkpoints.io import safe_torch_load
from tests.callbacks.test_preemption import _args, _signal_at


@pytest.mark.slow
def test_the_advised_rerun_resumes_the_same_job_directories(
    tmp_path: Path, procs: SimpleNamespace, tiny: tuple[str, ...]
) -> None:
    sweep_dir = tmp_path / "sweep"
    sweep = [
        "-m",
        *_args(tiny, "trainer.max_steps="),
        "trainer.max_steps=16",
        "seed=1,2",
        f"hydra.sweep.dir={sweep_dir}",
        "hydra.sweep.subdir='${sweep_subdir:${hydra.job.override_dirname}}'",
    ]
    proc, _ = _signal_at(
        procs,
        sweep,
        tmp_path / "1.log",
        tmp_path / "marker.json",
        "pause_train_step=6",
        signal.SIGTERM,
    )
    text = (tmp_path / "1.log").read_text()
    assert proc.returncode == 128 + signal.SIGTERM, text[-3000:]
    before = sorted(p.name for p in sweep_dir.iterdir() if p.is_dir())
    advice = re.search(
        r"run again with (hydra\.sweep\.dir=\S+) (sweep_resume\.skip_completed=true) "
        r"(sweep_resume\.incomplete=last)",
        text,
    )
    assert advice is not None, text[-3000:]
    assert advice.group(1) == f"hydra.sweep.dir={sweep_dir.resolve()}"
    first = sweep_dir / before[0]
    assert safe_torch_load(first / "checkpoints" / "last.ckpt")["global_step"] == 6

    rerun = [a for a in sweep if not a.startswith("hydra.sweep.dir=")] + list(advice.groups())
    log = tmp_path / "2.log"
    again = procs.start(rerun, log)
    assert again.wait(timeout=300) == 0, log.read_text()[-3000:]
    after = sorted(p.name for p in sweep_dir.iterdir() if p.is_dir())
    # the preempted job's directory, and the second job's
    assert len(after) == 2 and set(before) <= set(after), after
    assert not any("sweep_resume" in name for name in after), after  # no second set of directories
    assert f"continuing from {first / 'checkpoints' / 'last.ckpt'}" in log.read_text()
    for job in after:
        assert json.loads((sweep_dir / job / "metrics.json").read_text())["status"] == "completed"
    assert not (first / "attempts").exists()  # resumed, not restarted
