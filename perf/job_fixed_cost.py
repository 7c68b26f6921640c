"""Per-job fixed cost: where the wall time of a short synthetic job goes besides its training steps,
for a job alone in its process and for jobs several to a process, in one run.

One job of study 2's synthetic configuration (``experiment=study_length_generalization`` with
its copy task and RoPE; ``--steps`` optimizer steps instead of the task's thousands) runs

* **alone**: ``python -m src.train`` in a fresh process (what one job pays by itself), and
* **shared**: ``--jobs`` such jobs (seeds 1..K) in one ``python -m src.train -m`` multirun, one
  process with Hydra's basic launcher, as ``python -m src.study`` runs a stage (the joblib launcher
  of the study scripts hands job after job to the same worker processes too);

with a timing callback (``PhaseClock``) that stamps the wall clock at Lightning's hooks, and a
Hydra callback (``JobClock``) that stamps each job's start and end. The phases:

* start → trainer built: alone, interpreter start, imports, Hydra's composition, the config
  validation, the data, the model and the task; shared, from the previous job's end (Hydra's
  next job, the composition, the data, the model: the imports are paid once);
* trainer built → first step: Lightning's set-up (strategy, optimizer, loggers, checkpoint
  directory) up to the start of the first training batch;
* the training steps (reported, not part of the fixed cost);
* validations (at ``--steps``: one, with the n-gram reference fitted at its end or read from its
  cache), the test (every test length), and last step → exit (alone) or → the job's end (shared)
  without them (checkpoints, metrics.json, loggers).

The shared figure is the median over jobs 2..K; the amortized figure spreads the one process
start and exit over the K jobs: (process wall − all training steps) / K. A warm-up job fills the
data and n-gram caches first, so neither side pays a fit the other reads from the cache. Jobs per
hour at ``--steps`` steps: 3600 / (a job's wall time), alone, and 3600·K / (the multirun's wall
time), shared. ``python -c "import lightning"`` is timed in its own process beside them.
Measurement only: nothing here changes a run; tests/training/test_shared_process.py shows that a
job's results do not depend on which of the two ways it ran.

    python perf/job_fixed_cost.py --threads 1        # alone ×3 against 8 jobs to a process, 20 steps
    git worktree add /tmp/before <commit>            # and the job alone at an earlier commit:
    python perf/job_fixed_cost.py --threads 1 --before /tmp/before
    python perf/job_fixed_cost.py --quick            # 2 steps, 2 jobs: a smoke run
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perf.common import REPO_ROOT, base_parser, machine_header, median, setup, table

JOB = [
    "experiment=study_length_generalization",
    "+experiment/study_length_generalization/task=copy",
    "model/position=rope",  # on the command line, so a multirun does not sweep the study's schemes
]


#: a module the jobs import the clocks from, whichever checkout runs them (written beside the cache)
SHIM = "fixed_cost_clocks"


def _write_shim(directory: Path) -> None:
    clocks = Path(__file__).with_name("phase_clocks.py")
    (directory / f"{SHIM}.py").write_text(
        "import importlib.util\n"
        f"_spec = importlib.util.spec_from_file_location('_phase_clocks', {str(clocks)!r})\n"
        "_module = importlib.util.module_from_spec(_spec)\n"
        "_spec.loader.exec_module(_module)\n"
        "PhaseClock, JobClock = _module.PhaseClock, _module.JobClock\n"
    )


def _train(args: list[str], cache: Path, repo: Path = REPO_ROOT) -> tuple[float, float]:
    """``python -m src.train <args>`` of the checkout ``repo`` in a fresh process (the clocks'
    module beside ``cache``): its start and exit times."""
    path = os.pathsep.join([str(repo), str(cache.parent)])
    env = dict(os.environ, TRANSFORMER_LAB_CACHE=str(cache), PYTHONPATH=path)
    t0 = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "src.train", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    t_exit = time.time()
    if proc.returncode:
        raise RuntimeError(f"the job failed:\n{proc.stderr[-3000:]}")
    return t0, t_exit


def _steps_args(steps: int) -> list[str]:
    return [
        *JOB,
        f"trainer.max_steps={steps}",
        f"trainer.val_check_interval={steps}",
        f"+callbacks.phase_clock._target_={SHIM}.PhaseClock",
    ]


def _phases(rec: dict, begin: float, end: float) -> dict[str, float]:
    """One job's phases from its PhaseClock record, between ``begin`` (process start, or the
    previous job's end) and ``end`` (process exit, or this job's end)."""
    t, spans = rec["t"], rec["spans"]
    after = end - t["last_step_end"] - spans["validation"] - spans["test"]
    return {
        PHASES[0]: t["trainer_built"] - begin,
        PHASES[1]: t["first_step"] - t["trainer_built"],
        PHASES[2]: t["last_step_end"] - t["first_step"],
        PHASES[3]: spans["validation"],
        PHASES[4]: spans["test"],
        PHASES[5]: after,
        PHASES[6]: end - begin,
    }


PHASES = (
    "start → trainer built (alone: imports; config, data, model)",
    "trainer built → first step (Lightning set-up)",
    "training steps",
    "validation (with the n-gram fit or its cache)",
    "test (every test length)",
    "last step → exit / job end, less validation and test (records)",
    "whole job",
)


def run_alone(steps: int, workdir: Path, cache: Path, repo: Path = REPO_ROOT) -> dict[str, float]:
    """One job (seed 1) of the checkout ``repo`` in a fresh process; the phase durations in
    seconds."""
    stamps = workdir / "phases.json"
    args = [
        *_steps_args(steps),
        "seed=1",
        f"+callbacks.phase_clock.path={stamps}",
        f"hydra.run.dir={workdir / 'run'}",
    ]
    t0, t_exit = _train(args, cache, repo)
    return _phases(json.loads(stamps.read_text()), t0, t_exit)


def run_shared(steps: int, jobs: int, workdir: Path, cache: Path, repo: Path = REPO_ROOT) -> dict:
    """``jobs`` jobs (seeds 1..jobs) in one multirun process: each job's phases (from the previous
    job's end; the first from the process start), the process's wall time and its process ids."""
    sweep = workdir / "sweep"
    args = [
        "-m",
        *_steps_args(steps),
        f"seed={','.join(str(s) for s in range(1, jobs + 1))}",
        "+callbacks.phase_clock.path=${paths.output_dir}/phases.json",
        f"+hydra.callbacks.job_clock._target_={SHIM}.JobClock",
        f"hydra.sweep.dir={sweep}",
    ]
    t0, t_exit = _train(args, cache, repo)
    done = [d for d in sweep.iterdir() if (d / "job_clock.json").is_file()]
    clocks = sorted(
        ((json.loads((d / "job_clock.json").read_text()), d) for d in done),
        key=lambda c: c[0]["num"],
    )
    if len(clocks) != jobs:
        raise RuntimeError(f"{len(clocks)} of {jobs} jobs wrote job_clock.json in {sweep}")
    per_job, begin = [], t0
    for clock, d in clocks:
        per_job.append(_phases(json.loads((d / "phases.json").read_text()), begin, clock["end"]))
        begin = clock["end"]
    return {"jobs": per_job, "wall_s": t_exit - t0, "pids": sorted({c["pid"] for c, _ in clocks})}


def import_lightning_s() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import lightning"], check=True, cwd=REPO_ROOT)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict:
    p = base_parser(__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20, help="optimizer steps of the job")
    p.add_argument("--jobs", type=int, default=8, help="jobs in the shared process (seeds 1..K)")
    p.add_argument(
        "--before",
        type=Path,
        default=None,
        help="a checkout of an earlier commit (git worktree add <dir> <commit>): its job alone "
        "and shared, measured in the same run; its job alone is the ratio's baseline",
    )
    args = p.parse_args(argv)
    setup(args)
    if args.quick:
        args.steps, args.jobs = 2, 2
    if args.jobs < 2:
        raise SystemExit("--jobs: at least 2 (the shared figure is the median of jobs 2..K)")
    repeats = args.repeats or (1 if args.quick else 3)
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        _write_shim(Path(tmp))
        run_alone(args.steps, Path(tmp) / "warm-up", cache)  # fills the caches; not counted
        alone = [run_alone(args.steps, Path(tmp) / f"alone{i}", cache) for i in range(repeats)]
        before = [
            run_alone(args.steps, Path(tmp) / f"before{i}", cache, args.before)
            for i in range(repeats if args.before else 0)
        ]
        imports = [import_lightning_s() for _ in range(repeats)]
        shared = run_shared(args.steps, args.jobs, Path(tmp) / "shared", cache)
        before_shared = None
        if args.before:
            before_shared = run_shared(
                args.steps, args.jobs, Path(tmp) / "before-shared", cache, args.before
            )
    # the columns: (name, phases, the fixed cost with the process start and exit, jobs per hour)
    columns = []
    for name, runs in (("before, alone", before), ("alone", alone)):
        if runs:
            ph = {k: median([r[k] for r in runs]) for k in PHASES}
            fixed = ph["whole job"] - ph["training steps"]
            columns.append((name, ph, fixed, 3600 / ph["whole job"]))
    for name, sh in (("before, shared", before_shared), ("shared", shared)):
        if sh:
            ph = {k: median([r[k] for r in sh["jobs"][1:]]) for k in PHASES}
            steps_all = sum(r["training steps"] for r in sh["jobs"])
            spread = (sh["wall_s"] - steps_all) / args.jobs  # the one start and exit spread
            columns.append((name, ph, spread, 3600 * args.jobs / sh["wall_s"]))
    by = {c[0]: c for c in columns}
    baseline = by["before, alone" if before else "alone"][2]
    extra = {
        "job": f"python -m src.train {' '.join(JOB)} trainer.max_steps={args.steps}",
        "alone": f"a fresh process per job; median of {repeats} job(s), after a warm-up job "
        "that filled the caches",
        "shared": f"{args.jobs} jobs (seeds 1..{args.jobs}) in one multirun process; its phases "
        f"are the median of jobs 2..{args.jobs}, its fixed cost spreads the one process start "
        f"and exit over the {args.jobs} jobs: (process wall − every job's steps) / {args.jobs}",
        "this checkout": str(REPO_ROOT),
    }
    if before:
        extra["before"] = f"the checkout {args.before}, measured in this same run"
    print(
        machine_header(
            "Per-job fixed cost: one synthetic job of study 2 alone, and jobs several to a process",
            extra,
        )
    )
    print()
    rows = [[k, *(c[1][k] for c in columns)] for k in PHASES]
    rows += [
        [
            "fixed cost (whole job − training steps)",
            *(c[1]["whole job"] - c[1]["training steps"] for c in columns),
        ],
        ["fixed cost, with the process start and exit", *(c[2] for c in columns)],
        [
            f"fixed cost / {'before, alone' if before else 'alone'} (goal ≤ 0.25)",
            *(c[2] / baseline for c in columns),
        ],
        [f"jobs per hour at {args.steps} steps", *(c[3] for c in columns)],
    ]
    print(table(["phase", *(f"{c[0]} s" for c in columns)], rows))
    print(f'\npython -c "import lightning" (its own process): {median(imports):.2f} s')
    print(
        "per-job fixed cost: "
        + ", ".join(f"{c[0]} {c[2]:.2f} s ({c[2] / baseline:.2f}×)" for c in columns)
        + f"; jobs per hour at {args.steps} steps: "
        + ", ".join(f"{c[0]} {c[3]:.0f}" for c in columns)
    )
    a, sh = by["alone"], by["shared"]
    return {
        "phases": a[1],
        "fixed_s": a[2],
        "shared_phases": sh[1],
        "shared_fixed_s": sh[1]["whole job"] - sh[1]["training steps"],
        "amortized_fixed_s": sh[2],
        "before": {c[0]: c[2] for c in columns if c[0].startswith("before")},
        "ratio": sh[2] / baseline,
        "jobs_per_hour": {c[0]: c[3] for c in columns},
        "import_lightning_s": median(imports),
    }


if __name__ == "__main__":
    main()
