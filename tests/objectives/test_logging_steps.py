"""``train/loss`` is logged only on the steps the loggers write (``logs_this_step``): every logger
still gets it at each ``log_every_n_steps``, and metrics.json's final ``train/loss`` is the last
step's, equal to what a run logging every step records."""

from __future__ import annotations

import json
from pathlib import Path

import lightning.pytorch as pl
import pytest

from tests.training.conftest import TINY, read_csv_metrics, series, train_in_process

BASE = [
    o
    for o in TINY
    if not o.startswith(
        ("trainer.max_steps", "trainer.log_every_n_steps", "trainer.val_check_interval")
    )
]


def test_loggers_get_every_logging_step_and_metrics_json_the_last(tmp_path: Path) -> None:
    common = [*BASE, "trainer.max_steps=7", "trainer.val_check_interval=7"]
    sparse, dense = tmp_path / "every3", tmp_path / "every1"
    train_in_process([*common, "trainer.log_every_n_steps=3"], sparse)
    train_in_process([*common, "trainer.log_every_n_steps=1"], dense)
    every1 = series(read_csv_metrics(dense), "train/loss")
    every3 = series(read_csv_metrics(sparse), "train/loss")
    assert sorted(every1) == list(range(7))  # CSV steps are 0-based: optimizer steps 1..7
    assert sorted(every3) == [2, 5]  # optimizer steps 3 and 6, as Lightning writes them
    assert every3 == {s: every1[s] for s in (2, 5)}  # the same values as the run logging every step
    final = json.loads((sparse / "metrics.json").read_text())["train/loss"]
    assert final == pytest.approx(every1[6], rel=1e-6)  # step 7, not step 6
    assert json.loads((dense / "metrics.json").read_text())["train/loss"] == pytest.approx(
        final, rel=1e-6
    )


def test_a_run_stopped_by_a_callback_logs_that_steps_loss(tmp_path: Path) -> None:
    """A callback that sets ``trainer.should_stop`` after step 4 (as Lightning's Timer does for
    ``trainer.max_time``) makes step 4 a logging step: its own loss, not step 3's, is written."""
    ref = tmp_path / "ref"  # the same schedule (decay over 20 steps), stopped by max_steps at 4
    train_in_process(
        [
            *BASE,
            "scheduler.decay_steps=20",
            "trainer.max_steps=4",
            "trainer.val_check_interval=4",
            "trainer.log_every_n_steps=1",
        ],
        ref,
    )
    every1 = series(read_csv_metrics(ref), "train/loss")
    run = tmp_path / "stopped"
    train_in_process(
        [
            *BASE,
            "scheduler.decay_steps=20",
            "trainer.max_steps=20",
            "trainer.val_check_interval=20",
            "trainer.log_every_n_steps=3",
            "+callbacks.stop._target_=tests.objectives.test_logging_steps.StopAfter",
            "+callbacks.stop.step=4",
        ],
        run,
    )
    logged = series(read_csv_metrics(run), "train/loss")
    assert sorted(logged) == [2, 3] and logged[3] == pytest.approx(every1[3], rel=1e-6)
    assert json.loads((run / "metrics.json").read_text())["train/loss"] == pytest.approx(
        every1[3], rel=1e-6
    )


class StopAfter(pl.Callback):
    """Sets ``trainer.should_stop`` once ``step`` optimizer steps are done."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs, batch, batch_idx
    ) -> None:
        if trainer.global_step >= self.step:
            trainer.should_stop = True
