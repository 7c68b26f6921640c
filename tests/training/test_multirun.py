"""Multirun and multi-process runs through the real command line (slow: several processes).

* a 2x2 sweep gives four run directories, named by the swept overrides, each with its metrics.json;
* a failing job is recorded (status "failed") and does not stop the others;
* DDP with 2 CPU processes (gloo) inside a multirun: one run directory, ranks saw different
  batches and ended with identical weights, the sweep was not re-run by rank 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.training.conftest import TINY, run_cli

pytestmark = pytest.mark.slow

FAST = [o for o in TINY if o != "trainer=cpu"] + [
    "trainer.max_steps=2",
    "trainer.limit_val_batches=1",
    "trainer.limit_test_batches=1",
    "trainer.val_check_interval=2",
]


def job_dirs(sweep: Path) -> list[Path]:
    return sorted(p for p in sweep.iterdir() if p.is_dir() and not p.name.startswith("."))


def test_grid_sweep_gives_one_directory_per_job(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    r = run_cli(
        [
            "-m",
            "trainer=cpu",
            *FAST,
            "model.norm_placement=pre,post",
            "model/position=learned,rope",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    dirs = job_dirs(sweep)
    # named by the swept overrides only (src/runs/sweep_dirs.py); the fixed ones (trainer.max_steps=2 …) are left out
    assert [d.name for d in dirs] == [
        f"model.norm_placement={n},model.position={p}"
        for n in ("post", "pre")
        for p in ("learned", "rope")
    ]
    assert (
        f"sweep directory: {sweep.resolve()}" in r.stdout
        and f"python -m src.report {sweep.resolve()}" in r.stdout
    )
    seen = set()
    for d in dirs:
        m = json.loads((d / "metrics.json").read_text())
        assert m["status"] == "completed" and m["global_step"] == 2 and m["val/loss"] is not None
        overrides = tuple(
            sorted(
                o
                for o in (d / ".hydra" / "overrides.yaml").read_text().split("\n")
                if "norm_placement" in o or "model/position" in o
            )
        )
        seen.add(overrides)
    assert len(seen) == 4  # four distinct grid points
    assert not (tmp_path / "outputs").exists()  # nothing went to the single-run directory


def test_failed_job_is_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    # d_model 32 is not divisible by 3 heads: job 0 fails at build time, job 1 must still run
    r = run_cli(
        ["-m", "trainer=cpu", *FAST, "model.n_head=3,2", f"hydra.sweep.dir={sweep}"], cwd=tmp_path
    )
    assert r.returncode != 0  # the sweep reports the failure at the end
    assert [d.name for d in job_dirs(sweep)] == ["model.n_head=2", "model.n_head=3"]
    ok, failed = (json.loads((d / "metrics.json").read_text()) for d in job_dirs(sweep))
    assert (
        failed["status"] == "failed"
        and "model.d_model=32 is not divisible by model.n_head=3" in failed["error"]
    )
    assert ok["status"] == "completed" and ok["global_step"] == 2


def test_ddp_two_cpu_processes_in_a_multirun(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    # two jobs x two ranks: Lightning's own re-launch would hand rank 1 the whole "-m seed=3,4" sweep
    r = run_cli(
        [
            "-m",
            "trainer=ddp_cpu",
            *FAST,
            "trainer.max_steps=3",
            "seed=3,4",
            "+callbacks.fingerprint._target_=src.callbacks.Fingerprint",
            "+callbacks.fingerprint.output_dir=${paths.output_dir}",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    jobs = job_dirs(sweep)
    assert [j.name for j in jobs] == ["seed=3", "seed=4"]  # no job ran twice, no extra directories
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "multirun").exists()
    first_batches = []
    for job in jobs:
        ranks = [json.loads((job / "fingerprints" / f"rank{r}.json").read_text()) for r in (0, 1)]
        assert [x["world_size"] for x in ranks] == [2, 2]
        assert len(ranks[0]["batches"]) == len(ranks[1]["batches"]) == 3
        assert not set(ranks[0]["batches"]) & set(ranks[1]["batches"])  # distinct data per rank
        assert ranks[0]["weights"] == ranks[1]["weights"]  # gradients were all-reduced
        first_batches.append(ranks[0]["batches"][0])
        m = json.loads((job / "metrics.json").read_text())
        assert m["status"] == "completed" and m["global_step"] == 3
        assert m["tokens_seen"] == 3 * 2 * 4 * 32  # steps x ranks x batch x block
        assert (job / ".hydra" / "config.yaml").is_file() and (
            job / "checkpoints" / "last.ckpt"
        ).is_file()
        assert list(job.glob("*_rank1.log"))  # rank 1 ran in this job's directory
    assert first_batches[0] != first_batches[1]  # each job ran its own seed
