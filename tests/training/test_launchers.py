"""Hydra's sweeper and launcher plugins through the real command line (slow: several processes).

* ``hydra/sweeper=optuna``: 3 trials of the quickstart recipe; the best it reports is the
  minimum over the trials' own metrics.json;
* ``hydra/launcher=joblib``: 4 jobs, 2 at once, each pinned to its own CPU; a re-run with
  ``sweep_resume.skip_completed`` skips the finished jobs and re-runs only the unfinished one,
  while a job whose directory a live process holds stops instead of archiving that job's files;
* ``hydra/launcher=submitit_local``: 2 jobs through submitit's local executor;
* without a plugin: one line naming the extra to install.
"""

from __future__ import annotations

import fcntl
import json
import os
import pickle
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from src.runs.plugins import PLUGINS, missing_plugin
from src.runs.slots import split

slow = pytest.mark.slow
QUIET = [
    "callbacks.progress_bar=null",
    "trainer.enable_progress_bar=false",
    "trainer.enable_model_summary=false",
]


def job_dirs(sweep: Path) -> list[Path]:
    return sorted(p for p in sweep.iterdir() if p.is_dir() and not p.name.startswith("."))


def metrics(job: Path) -> dict[str, Any]:
    return json.loads((job / "metrics.json").read_text())


@slow
def test_optuna_sweeper_reports_the_best_trial(tmp_path: Path, run_entry_point: Any) -> None:
    sweep = tmp_path / "optuna"
    r = run_entry_point(
        "src.train",
        [
            "-m",
            "experiment=quickstart",
            *QUIET,
            "~callbacks.sample_text",
            "trainer.max_steps=4",
            "trainer.val_check_interval=2",
            "trainer.limit_val_batches=2",
            "trainer.limit_test_batches=1",
            "hydra/sweeper=optuna",
            "hydra.sweeper.n_trials=3",
            "hydra.sweeper.sampler.seed=7",
            "optim.lr=tag(log,interval(1e-4,1e-2))",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    trials = job_dirs(sweep)
    assert len(trials) == 3
    best_by_trial = {}
    for t in trials:
        m = metrics(t)
        assert m["status"] == "completed"
        (lr,) = [
            o
            for o in yaml.safe_load((t / ".hydra" / "overrides.yaml").read_text())
            if o.startswith("optim.lr=")
        ]
        assert 1e-4 <= float(lr.split("=")[1]) <= 1e-2
        best_by_trial[t.name] = m["val/loss_best"]
    result = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert result["best_value"] == pytest.approx(min(best_by_trial.values()))
    best = min(best_by_trial, key=best_by_trial.get)
    overrides = yaml.safe_load((sweep / best / ".hydra" / "overrides.yaml").read_text())
    assert f"optim.lr={result['best_params']['optim.lr']}" in overrides


def _intervals(jobs: list[Path]) -> list[tuple[float, float, str]]:
    """(start, end, slot) per job: the sweep_resume stamp's start, metrics.json's mtime, the logged slot."""
    out = []
    for j in jobs:
        start = json.loads((j / ".sweep_job.json").read_text())["started"]
        (log,) = j.glob("*.log")
        (slot,) = re.findall(r"job slot (\d+/\d+): CPUs \[(\d+(?:, \d+)*)\]", log.read_text())
        out.append((start, (j / "metrics.json").stat().st_mtime, f"{slot[0]} cpus {slot[1]}"))
    return out


def _most_at_once(intervals: list[tuple[float, float, str]]) -> int:
    events = sorted([(s, 1) for s, _, _ in intervals] + [(e, -1) for _, e, _ in intervals])
    running = peak = 0
    for _, d in events:
        running += d
        peak = max(peak, running)
    return peak


@slow
def test_joblib_launcher_two_at_a_time_and_resume(
    tmp_path: Path, run_entry_point: Any, tiny_run: tuple[str, ...]
) -> None:
    sweep = tmp_path / "joblib"
    args = [
        "-m",
        *tiny_run,
        "trainer.max_steps=16",
        "trainer.val_check_interval=8",
        "seed=1,2,3,4",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "hydra.sweep.subdir=seed${seed}",
        "sweep_resume.skip_completed=true",
        f"hydra.sweep.dir={sweep}",
    ]
    r = run_entry_point("src.train", args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    jobs = job_dirs(sweep)
    assert [j.name for j in jobs] == ["seed1", "seed2", "seed3", "seed4"]
    assert all(
        metrics(j)["status"] == "completed" and metrics(j)["global_step"] == 16 for j in jobs
    )
    intervals = _intervals(jobs)
    assert _most_at_once(intervals) == 2  # two at once (n_jobs), never three
    for a in intervals:  # jobs that overlapped held different slots and CPUs
        for b in intervals:
            if a is not b and a[0] < b[1] and b[0] < a[1]:
                assert a[2] != b[2], (a, b)

    # re-run with one result removed while another job's directory is held by a live process (as
    # src/runs/lock.py holds it): the 2 free completed jobs are skipped, the removed one runs again, and
    # the held one stops at once naming its directory, its files untouched (nothing archived from under it)
    before = {j.name: (j / "metrics.json").stat().st_mtime_ns for j in jobs}
    (sweep / "seed3" / "metrics.json").unlink()
    held = sweep / "seed4"
    fd = os.open(held, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        r = run_entry_point("src.train", args, cwd=tmp_path)
    finally:
        os.close(fd)
    assert r.returncode != 0  # the held job failed, and the sweep says so at the end
    assert f"{held} is in use by another running job" in r.stderr
    after = {j.name: (j / "metrics.json").stat().st_mtime_ns for j in jobs}
    assert [n for n in after if after[n] != before[n]] == ["seed3"]
    assert all(
        "already completed" in (sweep / n / "train.log").read_text() for n in ("seed1", "seed2")
    )
    assert metrics(sweep / "seed3")["status"] == "completed"
    assert json.loads((sweep / "seed3" / ".sweep_job.json").read_text())["attempt"] == 2
    assert not (held / "attempts").exists() and metrics(held)["status"] == "completed"


@slow
def test_submitit_local_launcher(
    tmp_path: Path, run_entry_point: Any, tiny_run: tuple[str, ...]
) -> None:
    sweep = tmp_path / "submitit"
    r = run_entry_point(
        "src.train",
        [
            "-m",
            *tiny_run,
            "seed=1,2",
            "hydra/launcher=submitit_local",
            "hydra.launcher.timeout_min=10",
            "hydra.launcher.cpus_per_task=1",
            "hydra.launcher.gpus_per_node=0",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    jobs = job_dirs(sweep)
    assert [j.name for j in jobs] == [
        "seed=1",
        "seed=2",
    ]  # named by the swept override (src/runs/sweep_dirs.py)
    assert all(metrics(j)["status"] == "completed" and metrics(j)["global_step"] == 4 for j in jobs)
    # submitit ran them: its own records
    results = sorted((sweep / ".submitit").glob("*/*_result.pkl"))
    assert len(results) == 2
    for p in results:
        status, value = pickle.loads(p.read_bytes())
        assert status == "success", value


def test_missing_plugin_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: (
            None if name.startswith("hydra_plugins.hydra_submitit") else real(name, *a)
        ),
    )
    message = missing_plugin(["-m", "model.n_layer=2,4", "hydra/launcher=submitit_slurm"])
    assert message is not None
    assert "hydra-submitit-launcher" in message and "pip install -e '.[slurm]'" in message
    # installed by .[dev]
    assert missing_plugin(["hydra/launcher=joblib", "hydra/sweeper=optuna"]) is None
    assert {o.split("=")[1] for o in PLUGINS} == {
        "joblib",
        "submitit_slurm",
        "submitit_local",
        "optuna",
    }


def test_slots_split_the_machine() -> None:
    assert [split(list(range(8)), k, 4) for k in range(4)] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [split(list(range(5)), k, 2) for k in range(2)] == [[0, 1, 2], [3, 4]]
    assert [split(["0", "1"], k, 4) for k in range(4)] == [
        ["0"],
        ["1"],
        ["0"],
        ["1"],
    ]  # CPUs shared round robin


def test_our_errors_survive_pickling() -> None:
    """A job's error travels back to the launcher pickled (joblib, submitit): every exception class
    defined in src (the types of src.errors and the few kept beside their code)."""
    import importlib

    from src import errors
    from tests.config.test_catalogue_coverage import exception_classes

    types = [getattr(importlib.import_module(module), name) for module, name in exception_classes()]
    assert errors.ConfigError in types and errors.Preempted in types and len(types) > 6
    for cls in types:
        e = (
            cls("model.n_head=5: a message", 10)
            if cls is errors.Preempted
            else cls("model.n_head=5: a message")
        )
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is cls and str(back) == str(e) == "model.n_head=5: a message"
    back = pickle.loads(pickle.dumps(errors.Preempted("preempted by SIGUSR1 at step 3", signum=10)))
    assert back.code == 138 and back.signum == 10  # the exit status travels too


def test_a_job_waits_for_a_slot_then_names_the_pids_holding_them(tmp_path: Path) -> None:
    """Every slot held: the job waits for one to be released instead of failing at once; when none is released
    in time the error names the pids holding them (an orphaned worker of a killed sweep, in study 1)."""
    import threading

    from src.errors import ConfigError
    from src.runs.slots import _claim

    lock_dir = tmp_path / ".slots"
    lock_dir.mkdir()
    held = []
    for k in range(2):
        fd = os.open(lock_dir / f"{k}.lock", os.O_CREAT | os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, b"4242\n")
        held.append(fd)
    with pytest.raises(ConfigError, match=r"held by live processes \(pids 4242, 4242\) after 0 s"):
        _claim(lock_dir, 2, wait_s=0.3)
    timer = threading.Timer(0.5, os.close, args=(held[1],))  # the holder exits
    timer.start()
    try:
        index, fd = _claim(lock_dir, 2, wait_s=30)
        assert index == 1
        os.close(fd)
    finally:
        timer.join()
        os.close(held[0])


PIN = """
import json, os, sys
from omegaconf import OmegaConf
from src.errors import ConfigError
from src.runs.slots import pin_job
hc = OmegaConf.create({"launcher": {"_target_": "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
                                    "n_jobs": int(sys.argv[2])}, "sweep": {"dir": sys.argv[1]}})
try:
    slot = pin_job(hc, accelerator=sys.argv[3])
except ConfigError as e:
    print(json.dumps({"error": str(e)}))
else:
    print(json.dumps({"index": slot.index, "cpus": sorted(os.sched_getaffinity(0)),
                      "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "threads": os.environ["OMP_NUM_THREADS"]}))
"""


def test_joblib_slot_pins_cpus_and_gpus(tmp_path: Path) -> None:
    """With slot 0 held by a live job, the next worker on an 8-GPU machine with n_jobs=4 takes slot 1:
    GPUs 2,3 as its CUDA_VISIBLE_DEVICES, its group of the CPU cores; more jobs than GPUs is refused."""
    import subprocess
    import sys

    (tmp_path / ".slots").mkdir()
    held = os.open(tmp_path / ".slots" / "0.lock", os.O_CREAT | os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    cpus = sorted(os.sched_getaffinity(0))

    def pin(n_jobs: int, accelerator: str = "auto") -> dict[str, Any]:
        out = subprocess.run(
            [sys.executable, "-c", PIN, str(tmp_path), str(n_jobs), accelerator],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return json.loads(out.strip().splitlines()[-1])

    try:
        got = pin(4)
        assert got["index"] == 1 and got["cuda"] == "2,3"
        assert got["cpus"] == split(cpus, 1, 4) and got["threads"] == str(len(split(cpus, 1, 4)))
        # 16 jobs, 8 GPUs: one GPU each is impossible
        assert "hydra.launcher.n_jobs=8" in pin(16)["error"]
        cpu_only = pin(16, accelerator="cpu")  # CPU jobs: GPUs not handed out
        assert cpu_only["cuda"] == "0,1,2,3,4,5,6,7" and cpu_only["index"] == 1
    finally:
        os.close(held)
