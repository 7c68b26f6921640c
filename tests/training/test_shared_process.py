"""Several jobs to a process leave no trace in the results: a job of study 2's synthetic
configuration run second in a multirun (one process: Hydra's basic launcher, after a job with
another seed) writes the metrics.json, n-gram references and per-length results of the same job run alone in a fresh
process, except its timings and file paths.

This is what lets a study run its jobs several to a process (one multirun per stage, or a joblib
worker that takes job after job) and pay the interpreter start and the imports once
(perf/job_fixed_cost.py measures what it saves)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.training.conftest import run_cli

pytestmark = pytest.mark.slow

JOB = [
    "experiment=study_length_generalization",
    "+experiment/study_length_generalization/task=copy",
    "model/position=rope",  # on the command line: the experiment's sweep over positions is off
    "model.d_model=32",
    "model.n_head=2",
    "model.d_ff=64",
    "batch_size=4",
    "trainer.max_steps=4",
    "trainer.val_check_interval=4",
    "data.val_examples=8",
    "data.test_examples=8",
]
#: what differs between two runs of one job by construction: the clock and where files went
NOT_RESULTS = {"wall_time_s", "throughput_tokens_per_s", "best_ckpt", "last_ckpt"}


def job_of(sweep: Path, seed: int) -> tuple[Path, int]:
    """The sweep's job directory with ``seed=<seed>`` and its place in the multirun."""
    for d in sweep.iterdir():
        if d.is_dir() and f"seed={seed}" in (d / ".hydra" / "overrides.yaml").read_text():
            return d, yaml.safe_load((d / ".hydra" / "hydra.yaml").read_text())["hydra"]["job"][
                "num"
            ]
    raise AssertionError(f"no job with seed={seed} in {sweep}")


def test_a_job_second_in_a_shared_process_equals_the_job_alone(tmp_path: Path) -> None:
    sweep, alone = tmp_path / "sweep", tmp_path / "alone"
    r = run_cli(["-m", *JOB, "seed=2,1", f"hydra.sweep.dir={sweep}"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    r = run_cli([*JOB, "seed=1", f"hydra.run.dir={alone}"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    shared, num = job_of(sweep, 1)
    assert num == 1  # it ran after the seed-2 job, in the same process

    a = json.loads((alone / "metrics.json").read_text())
    b = json.loads((shared / "metrics.json").read_text())
    assert a["status"] == b["status"] == "completed"
    assert a.keys() == b.keys()
    assert {k for k in a if a[k] != b[k]} <= NOT_RESULTS
    for key in ("train/loss", "val/loss", "test/loss@16", "test/loss@32", "probe/icl_score"):
        assert isinstance(a[key], float) and a[key] == b[key], key  # bit-identical
    for name in ("ngram.json", "synthetic.json"):
        assert json.loads((alone / name).read_text()) == json.loads((shared / name).read_text())
    first = json.loads((job_of(sweep, 2)[0] / "metrics.json").read_text())
    assert first["train/loss"] != a["train/loss"]  # the jobs differ: the seed reached the run
