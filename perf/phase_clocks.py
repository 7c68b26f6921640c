"""The timing callbacks of perf/job_fixed_cost.py: ``PhaseClock`` (Lightning: wall clock at the
hooks that bound a job's phases) and ``JobClock`` (Hydra: each job's start and end). Standard
library, Lightning and Hydra only, so a job of another checkout can load this file by its path
(``job_fixed_cost.py --before``)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import lightning.pytorch as pl
from hydra.experimental.callback import Callback as HydraCallback


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
