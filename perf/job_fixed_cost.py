"""Per-job fixed cost: where the wall time of a short synthetic job goes besides its training steps.

One job of study 2's synthetic configuration (``experiment=study_length_generalization`` with
its copy task; ``--steps`` optimizer steps instead of the task's thousands) runs as
``python -m src.train`` in a fresh process, with a timing callback (``PhaseClock``) that stamps
the wall clock at Lightning's hooks. The phases:

* start → trainer built: interpreter start, imports, Hydra's composition, the config
  validation, the data (synthetic examples, tokenizer), the model and the task (the callback is
  built with the trainer, so its stamp is taken then);
* trainer built → first step: Lightning's set-up (strategy, optimizer, loggers, checkpoint
  directory) up to the start of the first training batch;
* the training steps (reported, not part of the fixed cost);
* validations (at ``--steps``: one, with the n-gram reference fitted at its end, or read from
  its cache), the test (every test length), and last step → exit without them (checkpoints,
  metrics.json, loggers, interpreter exit).

``python -c "import lightning"`` is timed in its own process beside it (what the imports alone
cost). Measurement only: nothing here changes a run.

    python perf/job_fixed_cost.py            # 1 job, 20 steps
    python perf/job_fixed_cost.py --quick    # 2 steps, a smoke run
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

from perf.common import REPO_ROOT, base_parser, machine_header, median, setup, table

JOB = [
    "experiment=study_length_generalization",
    "+experiment/study_length_generalization/task=copy",
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


def run_job(steps: int, workdir: Path, cache: Path) -> dict:
    """One job in a fresh process; the phase durations in seconds."""
    stamps = workdir / "phases.json"
    cmd = [
        sys.executable,
        "-m",
        "src.train",
        *JOB,
        f"trainer.max_steps={steps}",
        f"trainer.val_check_interval={steps}",
        f"hydra.run.dir={workdir / 'run'}",
        "+callbacks.phase_clock._target_=perf.job_fixed_cost.PhaseClock",
        f"+callbacks.phase_clock.path={stamps}",
    ]
    env = dict(os.environ, TRANSFORMER_LAB_CACHE=str(cache), PYTHONPATH=str(REPO_ROOT))
    t0 = time.time()
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    t_exit = time.time()
    if proc.returncode:
        raise RuntimeError(f"the job failed:\n{proc.stderr[-3000:]}")
    rec = json.loads(stamps.read_text())
    t, spans = rec["t"], rec["spans"]
    after = t_exit - t["last_step_end"] - spans["validation"] - spans["test"]
    return {
        "start → trainer built (imports, config, data, model)": t["trainer_built"] - t0,
        "trainer built → first step (Lightning set-up)": t["first_step"] - t["trainer_built"],
        "training steps": t["last_step_end"] - t["first_step"],
        "validation (with the n-gram fit or its cache)": spans["validation"],
        "test (every test length)": spans["test"],
        "last step → exit, less validation and test (records, exit)": after,
        "whole job": t_exit - t0,
    }


def import_lightning_s() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import lightning"], check=True, cwd=REPO_ROOT)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict:
    p = base_parser(__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20, help="optimizer steps of the job")
    args = p.parse_args(argv)
    setup(args)
    if args.quick:
        args.steps = 2
    repeats = args.repeats or 1
    runs, imports = [], []
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"  # a fresh cache: the first job pays the n-gram fit
        for i in range(repeats):
            runs.append(run_job(args.steps, Path(tmp) / f"job{i}", cache))
            imports.append(import_lightning_s())
    phases = {k: median([r[k] for r in runs]) for k in runs[0]}
    fixed = phases["whole job"] - phases["training steps"]
    print(
        machine_header(
            "Per-job fixed cost: one synthetic job of study 2, phase by phase",
            {
                "job": f"python -m src.train {' '.join(JOB)} trainer.max_steps={args.steps}",
                "timing": f"wall clock at Lightning's hooks (PhaseClock); median of {repeats} "
                "job(s), the first with an empty cache",
            },
        )
    )
    print()
    nan = float("nan")
    rows = [
        [k, v, nan if k in ("training steps", "whole job") else v / fixed]
        for k, v in phases.items()
    ]
    rows.append(["fixed cost (whole job − training steps)", fixed, 1.0])
    rows.append(['python -c "import lightning" (its own process)', median(imports), nan])
    print(table(["phase", "s", "share of fixed cost"], rows))
    return {"phases": phases, "fixed_s": fixed, "import_lightning_s": median(imports)}


if __name__ == "__main__":
    main()
