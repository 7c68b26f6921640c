"""A preemption signal outside a fit's step loop (a test, a ``trainer.validate``, a probe, an n-gram
fit) ends the run within a batch, with the ``Preempted`` line and ``status: failed`` in
metrics.json, not after the whole phase with ``status: completed``.

The subprocess test trains a synthetic copy model for 2 steps, then tests it at lengths 16 and 384
(one batch each): the signal lands in the long last batch, after which Lightning's evaluation loop
checks nothing by itself."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities.exceptions import SIGTERMException

from src.callbacks import preemption
from src.callbacks.preemption import Preemption, catch_sigterm, preempted, stop_if_preempted
from src.evaluation.ngram import KneserNey

TESTING = "testing the final weights"  # the runner's line as the test begins


def _wait_for_line(proc: subprocess.Popen[bytes], log: Path, line: str, timeout: float) -> None:
    t0 = time.monotonic()
    while line not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() - t0 > timeout:
            proc.kill()
            pytest.fail(f"no {line!r} in the log:\n{log.read_text()[-3000:]}")
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR1], ids=["SIGTERM", "SIGUSR1"])
def test_signal_during_the_test_phase_ends_the_run_preempted(
    tmp_path: Path, procs: SimpleNamespace, sig: signal.Signals
) -> None:
    run_dir = tmp_path / "run"
    log = tmp_path / "log.txt"
    args = [
        "experiment=synthetic_quickstart",
        "trainer.max_steps=2",
        "trainer.val_check_interval=2",
        "trainer.limit_val_batches=1",
        "data.val_examples=32",
        "data.test_lengths=[16,384]",
        # 8 batches at length 384: the test phase outlasts the 1.5 s wait on a fast machine too
        "data.test_examples=256",
        f"hydra.run.dir={run_dir}",
    ]
    proc = procs.start(args, log, TRANSFORMER_LAB_CACHE=str(tmp_path / "cache"))
    try:
        _wait_for_line(proc, log, TESTING, timeout=240)
        time.sleep(1.5)  # into the length-384 batch, the last one
        sent = time.monotonic()
        proc.send_signal(sig)
        proc.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text(errors="replace")
    assert proc.returncode == 128 + sig, text[-3000:]
    assert took < 10, f"{took:.1f}s after the signal\n{text[-3000:]}"
    assert f"preempted by {sig.name} at step 2 during trainer.test()" in text, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    record = json.loads((run_dir / "metrics.json").read_text())
    assert record["status"] == "failed"
    assert record["error"].startswith(f"Preempted: preempted by {sig.name}")


def _trainer(fn: TrainerFn, received: bool = False, held: bool = False) -> Any:
    cb = Preemption()
    cb._held = held
    return SimpleNamespace(
        state=SimpleNamespace(fn=fn),
        received_sigterm=received,
        sanity_checking=False,
        callbacks=[cb],
    )


def test_validation_and_test_batches_outside_fit_stop_at_their_start() -> None:
    for fn in (TrainerFn.VALIDATING, TrainerFn.TESTING):
        trainer = _trainer(fn, received=True)
        hook = (
            Preemption.on_validation_batch_start
            if fn == TrainerFn.VALIDATING
            else Preemption.on_test_batch_start
        )
        with pytest.raises(SIGTERMException):
            hook(trainer.callbacks[0], trainer, None, {}, 0)
    # inside fit a validation is held whole (tests/callbacks/test_preemption.py)
    trainer = _trainer(TrainerFn.FITTING, received=True)
    Preemption.on_validation_batch_start(trainer.callbacks[0], trainer, None, {}, 0)


def test_a_held_or_caught_signal_counts_as_preempted() -> None:
    assert not preempted(_trainer(TrainerFn.FITTING))
    assert preempted(_trainer(TrainerFn.FITTING, held=True))
    with catch_sigterm():
        preemption._received.append(signal.SIGTERM)  # what the handler records
        with pytest.raises(SIGTERMException):
            stop_if_preempted(None)
    assert not preempted(None)  # cleared when the run ends


def test_an_ngram_fit_stops_between_its_orders() -> None:
    calls: list[int] = []

    def stop() -> None:
        calls.append(1)
        if len(calls) == 3:
            raise SIGTERMException()

    seqs = [np.arange(50) % 7]
    with pytest.raises(SIGTERMException):
        KneserNey(4, 7).fit(seqs, stop=stop)
    assert len(calls) == 3
    KneserNey(4, 7).fit(seqs, stop=lambda: None)  # the same fit, not stopped, completes


def test_a_probe_is_skipped_once_a_signal_arrived() -> None:
    from src.callbacks.probes import Probes

    probes = Probes(every_n_steps=1)
    probes.batch = object()  # type: ignore[assignment]  # never read: the probe is skipped first
    trainer = _trainer(TrainerFn.FITTING, received=True)
    trainer.global_step = 3
    assert probes.probe(trainer, None) is None  # type: ignore[arg-type]
