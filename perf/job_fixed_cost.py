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

import lightning.pytorch as pl
from hydra.experimental.callback import Callback as HydraCallback

from perf.common import REPO_ROOT, base_parser, machine_header, median, setup, table

JOB = [
    "experiment=study_length_generalization",
    "+experiment/study_length_generalization/task=copy",
    "model/position=rope",  # on the command line, so a multirun does not sweep the study's schemes
]


class PhaseClock(pl.Callback):
    """Wall-clock stamps (``time.time()``) at the hooks that bound each phase, written to
    ``path`` as JSON when the job ends (``on_test_end``, else ``teardown`` of fit)."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.t: dict[str, float] = {"trainer_built": time.time()}
        self.spans: dict[str, float] = {"validation": 0.0, "test": 0.0}
        self._open: dict[str, float] = {}

    def _write(self) -> None:
        self.path.write_text(json.dumps({"t": self.t, "spans": self.spans}))

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:  # noqa: ANN001
        self.t.setdefault("first_step", time.time())

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:  # noqa: ANN001
        self.t["last_step_end"] = time.time()

    def on_validation_start(self, trainer, pl_module) -> None:  # noqa: ANN001
        self._open["validation"] = time.time()

    def on_validation_end(self, trainer, pl_module) -> None:  # noqa: ANN001
        # the n-gram reference is fitted in on_validation_epoch_end: inside this span
        self.spans["validation"] += time.time() - self._open.pop("validation")

    def on_test_start(self, trainer, pl_module) -> None:  # noqa: ANN001
        self._open["test"] = time.time()

    def on_test_end(self, trainer, pl_module) -> None:  # noqa: ANN001
        self.spans["test"] += time.time() - self._open.pop("test")
        self._write()

    def teardown(self, trainer, pl_module, stage: str) -> None:  # noqa: ANN001
        self._write()


class JobClock(HydraCallback):
    """Hydra callback: each job's start and end (``time.time()``), its number in the multirun and
    its process id, written to ``job_clock.json`` in the job's directory."""

    def on_job_start(self, config, **kwargs) -> None:  # noqa: ANN001
        self.start = time.time()

    def on_job_end(self, config, job_return, **kwargs) -> None:  # noqa: ANN001
        hydra = job_return.hydra_cfg.hydra
        record = {"start": self.start, "end": time.time(), "num": hydra.job.num, "pid": os.getpid()}
        (Path(hydra.runtime.output_dir) / "job_clock.json").write_text(json.dumps(record))


def _train(args: list[str], cache: Path) -> tuple[float, float]:
    """``python -m src.train <args>`` in a fresh process: its start and exit times."""
    env = dict(os.environ, TRANSFORMER_LAB_CACHE=str(cache), PYTHONPATH=str(REPO_ROOT))
    t0 = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "src.train", *args],
        cwd=REPO_ROOT,
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
        "+callbacks.phase_clock._target_=perf.job_fixed_cost.PhaseClock",
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


def run_alone(steps: int, workdir: Path, cache: Path, seed: int = 1) -> dict[str, float]:
    """One job in a fresh process; the phase durations in seconds."""
    stamps = workdir / "phases.json"
    args = [
        *_steps_args(steps),
        f"seed={seed}",
        f"+callbacks.phase_clock.path={stamps}",
        f"hydra.run.dir={workdir / 'run'}",
    ]
    t0, t_exit = _train(args, cache)
    return _phases(json.loads(stamps.read_text()), t0, t_exit)


def run_shared(steps: int, jobs: int, workdir: Path, cache: Path) -> dict:
    """``jobs`` jobs (seeds 1..jobs) in one multirun process: each job's phases (from the previous
    job's end; the first from the process start), the process's wall time and its process ids."""
    sweep = workdir / "sweep"
    args = [
        "-m",
        *_steps_args(steps),
        f"seed={','.join(str(s) for s in range(1, jobs + 1))}",
        "+callbacks.phase_clock.path=${paths.output_dir}/phases.json",
        "+hydra.callbacks.job_clock._target_=perf.job_fixed_cost.JobClock",
        f"hydra.sweep.dir={sweep}",
    ]
    t0, t_exit = _train(args, cache)
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
    args = p.parse_args(argv)
    setup(args)
    if args.quick:
        args.steps, args.jobs = 2, 2
    if args.jobs < 2:
        raise SystemExit("--jobs: at least 2 (the shared figure is the median of jobs 2..K)")
    repeats = args.repeats or (1 if args.quick else 3)
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        run_alone(args.steps, Path(tmp) / "warm-up", cache)  # fills the caches; not counted
        alone = [run_alone(args.steps, Path(tmp) / f"alone{i}", cache) for i in range(repeats)]
        imports = [import_lightning_s() for _ in range(repeats)]
        shared = run_shared(args.steps, args.jobs, Path(tmp) / "shared", cache)
    a = {k: median([r[k] for r in alone]) for k in PHASES}
    s = {k: median([r[k] for r in shared["jobs"][1:]]) for k in PHASES}
    fixed_alone = a["whole job"] - a["training steps"]
    fixed_shared = s["whole job"] - s["training steps"]
    steps_all = sum(r["training steps"] for r in shared["jobs"])
    amortized = (shared["wall_s"] - steps_all) / args.jobs
    per_hour_alone = 3600 / a["whole job"]
    per_hour_shared = 3600 * args.jobs / shared["wall_s"]
    print(
        machine_header(
            "Per-job fixed cost: one synthetic job of study 2 alone, and jobs several to a process",
            {
                "job": f"python -m src.train {' '.join(JOB)} trainer.max_steps={args.steps}",
                "alone": f"a fresh process per job; median of {repeats} job(s) after a warm-up "
                "job that filled the caches",
                "shared": f"{args.jobs} jobs (seeds 1..{args.jobs}) in one multirun process "
                f"(process ids {shared['pids']}); median of jobs 2..{args.jobs}",
            },
        )
    )
    print()
    nan = float("nan")
    rows = [
        [k, a[k], s[k]] if k in ("training steps", "whole job") else [k, a[k], s[k]] for k in PHASES
    ]
    rows += [
        ["fixed cost (whole job − training steps)", fixed_alone, fixed_shared],
        [
            f"fixed cost, the process start and exit spread over {args.jobs} jobs",
            fixed_alone,
            amortized,
        ],
        ["fixed cost, shared / alone (goal ≤ 0.25)", 1.0, amortized / fixed_alone],
        [f"jobs per hour at {args.steps} steps", per_hour_alone, per_hour_shared],
        ['python -c "import lightning" (its own process)', median(imports), nan],
    ]
    print(table(["phase", "alone s", "shared s"], rows))
    print(
        f"\nper-job fixed cost: {fixed_alone:.2f} s alone, {amortized:.2f} s with {args.jobs} "
        f"jobs to a process ({amortized / fixed_alone:.2f}×); "
        f"{per_hour_alone:.0f} → {per_hour_shared:.0f} jobs per hour at {args.steps} steps"
    )
    return {
        "phases": a,
        "fixed_s": fixed_alone,
        "shared_phases": s,
        "shared_fixed_s": fixed_shared,
        "amortized_fixed_s": amortized,
        "ratio": amortized / fixed_alone,
        "jobs_per_hour": {"alone": per_hour_alone, "shared": per_hour_shared},
        "import_lightning_s": median(imports),
    }


if __name__ == "__main__":
    main()
