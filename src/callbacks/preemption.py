"""Preemption: on SIGTERM, or SLURM's pre-timeout signal, write a resumable ``last.ckpt`` at the
current step, then end the run; resuming from it continues exactly where the run stopped.

Lightning already turns SIGTERM into a flag (``trainer.received_sigterm``) and raises its
``SIGTERMException`` at the next step boundary: after the step's optimizer update, its
validation (when one is due) and its logging (``training_epoch_loop.on_advance_end``; under DDP
at the start of the next step, on every rank together). ``Preemption`` adds what it does not do:

* **the checkpoint.** At that boundary (``on_exception``) it writes ``last.ckpt`` of the run's
  ``ModelCheckpoint`` (else ``<default_root_dir>/checkpoints/last.ckpt``) through
  ``SafeCheckpointIO``: the same state as the ``last.ckpt`` written after a validation, so
  ``fit(ckpt_path=...)`` resumes on the next batch with the same optimizer, schedule and data
  position (bit-identical on CPU; tests/callbacks/test_preemption.py);
* **a whole validation.** Lightning's evaluation loop would stop a validation at its next batch,
  and a checkpoint taken there resumes into half a validation (Lightning re-runs neither the
  batches done nor counts them). So a SIGTERM during a validation of ``fit`` is held back until
  the validation ends: its loss is recorded and ``best-*.ckpt`` chosen as in an uninterrupted
  run, then the run stops. The cost: the rest of that validation (``trainer.limit_val_batches``)
  must fit in the grace period (SLURM's ``KillWait``, 30 s by default; ``--signal=USR1@<s>``);
  a run killed before that keeps the previous ``last.ckpt`` (atomic writes), so it still resumes
  exactly, from further back;
* **SLURM's pre-timeout signal at a step boundary.** With ``#SBATCH --signal=USR1@90`` Lightning's
  ``SLURMEnvironment(auto_requeue=True)`` (detected under SLURM) runs its handler inside the
  signal handler, mid-step: it would save ``hpc_ckpt_<n>.ckpt`` at whatever point the step had
  reached, then ``scontrol requeue`` the job. ``Preemption`` defers the Python handler of SIGUSR1
  and SIGUSR2 (Lightning's; submitit's, ``hydra/launcher=submitit_slurm``): the signal becomes a
  SIGTERM to this process (the path above), and once ``last.ckpt`` is written the deferred handler
  runs (Lightning's then writes ``hpc_ckpt_<n>.ckpt`` of the same state and requeues). A SIGUSR1/2
  with no handler is a preemption without requeue.

**A slow step is abandoned, not finished** (``src.callbacks.slow_step``): a SIGTERM in the middle of
a step slower than ``reliability.abandon_step_after_s`` stops it at its next block, and the
checkpoint of the step before it is written.

**Outside a fit's step loop** (``trainer.validate``, ``trainer.test``, the probes, an n-gram fit,
the moments between them) the signal stops the run within a batch: ``Preemption`` checks the flag
at the start of each validation or test batch that is not part of ``fit`` (and installs the
SIGUSR1/SIGUSR2 deferral for them too), long loops of the callbacks call ``stop_if_preempted``,
and ``catch_sigterm`` (around the whole run, ``src.training.runner``) keeps a SIGTERM that
arrives while Lightning's handler is not installed (between ``fit`` and ``test``), which the runner
checks after each phase. Nothing is written there (the weights are those of a checkpoint already).

The run then ends with ``Preempted`` (exit status 128 + the signal number; ``metrics.json``
records it as ``status: failed`` with the message). A sweep re-run with the same command, the same
``hydra.sweep.dir`` (the message names it) and ``sweep_resume.skip_completed=true
sweep_resume.incomplete=last`` continues that job from its ``last.ckpt`` in the same directory
(``src.runs.resume``; ``sweep_resume.*`` is never part of a job directory's name).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import lightning.pytorch as pl
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities.exceptions import SIGTERMException

from src.callbacks.slow_step import SlowStep, StepAbandoned
from src.errors import Preempted
from src.lightning_compat import set_received_sigterm

log = logging.getLogger(__name__)

#: signals SLURM's ``--signal`` sends before the time limit (Lightning's requeue_signal, submitit's)
REQUEUE_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2)

#: SIGTERMs received while ``catch_sigterm`` is open (the signal numbers)
_received: list[int] = []


@contextlib.contextmanager
def catch_sigterm() -> Iterator[None]:
    """Record a SIGTERM for the whole run, also where Lightning has no handler installed (between
    ``fit`` and ``test``); Lightning calls this handler too while its own is installed. A previous
    Python handler (submitit's) still runs. Restores the previous handler on exit."""
    _received.clear()
    try:
        previous = signal.getsignal(signal.SIGTERM)

        def handler(signum: int, frame: FrameType | None) -> None:
            _received.append(signum)
            if callable(previous):
                previous(signum, frame)

        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: Lightning's flag alone
        yield
        return
    try:
        yield
    finally:
        _received.clear()
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGTERM, previous)


def preempted(trainer: pl.Trainer | None) -> bool:
    """Whether a preemption signal has asked the run to stop (Lightning's flag, a SIGTERM held back
    by ``Preemption`` until a validation ends, or one ``catch_sigterm`` recorded)."""
    if _received:
        return True
    if trainer is None:
        return False
    held = any(isinstance(c, Preemption) and c._held for c in trainer.callbacks)
    return bool(trainer.received_sigterm or held)


def stop_if_preempted(trainer: pl.Trainer | None) -> None:
    """Raise Lightning's ``SIGTERMException`` (the runner turns it into ``Preempted``) when a
    preemption signal has arrived: the cheap check for a long loop outside the step loop."""
    if preempted(trainer):
        raise SIGTERMException()


class Preemption(pl.Callback):
    """Writes ``last.ckpt`` at the step boundary after SIGTERM / SIGUSR1 / SIGUSR2 (module
    docstring)."""

    def __init__(self, abandon_step_after_s: float | None = 10.0) -> None:
        self.signum: int | None = None  # the signal that asked the run to stop
        self.saved: Path | None = None  # the checkpoint written on the way out
        self.step = 0
        self.slow = SlowStep(abandon_step_after_s)
        self.abandoned: int | None = None  # the step stopped mid-way (its number, 1-based)
        self._deferred: dict[int, Any] = {}  # signal -> the handler it had at train start
        self._pending: tuple[int, Any] | None = None  # a deferred handler to run after the save
        self._held = False  # a SIGTERM held back until the validation ends
        self._validating = False  # inside a validation of fit (no checkpoint mid-way)

    # ------------------------------------------------------------ signals
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Lightning has registered its handlers by now (Trainer._run, before the fit loop starts)
        self.signum, self.saved, self._pending, self._held = None, None, None, False
        self.abandoned = None
        self._install_requeue_handlers()
        self.slow.install(trainer, pl_module)

    def _install_requeue_handlers(self) -> None:
        for sig in REQUEUE_SIGNALS:
            if signal.getsignal(sig) == self._on_requeue_signal:
                continue
            previous = signal.getsignal(sig)
            self._deferred[sig] = previous
            try:
                signal.signal(sig, self._on_requeue_signal)
            except ValueError:  # not the main thread: leave the signal alone
                self._deferred.pop(sig)

    def _on_requeue_signal(self, signum: int, frame: FrameType | None) -> None:
        previous = self._deferred.get(signum)
        if callable(previous) and self._pending is None:
            self._pending = (signum, previous)
        self.signum = signum
        # Lightning's SIGTERM path: flag, DDP broadcast, stop at the boundary
        os.kill(os.getpid(), signal.SIGTERM)

    def _restore_signals(self) -> None:
        for sig, handler in self._deferred.items():
            if handler is not None and signal.getsignal(sig) == self._on_requeue_signal:
                try:
                    signal.signal(sig, handler)
                except ValueError:
                    pass
        self._deferred = {}

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._restore_signals()
        self.slow.remove()

    # ------------------------------------------------------------ a slow step (slow_step.py)
    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self.slow.batch_start(trainer)

    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: Any
    ) -> None:
        self.slow.before_update()

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        self.slow.batch_end(trainer)

    # ------------------------------------------------------------ validate() and test()
    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._install_requeue_handlers()
        stop_if_preempted(trainer)

    def on_test_batch_start(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        # Lightning checks after each batch but the last of a dataloader; this covers the rest
        stop_if_preempted(trainer)

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._restore_signals()

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.state.fn == TrainerFn.FITTING:
            self._validating = not trainer.sanity_checking
            return
        self._install_requeue_handlers()
        stop_if_preempted(trainer)

    def on_validation_batch_start(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if trainer.state.fn != TrainerFn.FITTING:
            stop_if_preempted(trainer)

    # ------------------------------------------------------------ a whole validation
    def on_validation_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if (
            trainer.state.fn == TrainerFn.FITTING
            and not trainer.sanity_checking
            and trainer.received_sigterm
        ):
            self._held = True
            # hold Lightning's stop until this validation is whole
            set_received_sigterm(trainer, False)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.state.fn != TrainerFn.FITTING:
            self._restore_signals()
            return
        self._validating = False
        if self._held:
            self._held = False
            set_received_sigterm(trainer, True)  # stop at the boundary right after this validation
        self.slow.validation_end(trainer)
        if (
            trainer.state.fn == TrainerFn.FITTING
            and not trainer.sanity_checking
            and trainer.received_sigterm
        ):
            # write now: the state of a last.ckpt written after a validation (the boundary that
            # follows has already counted this step for the loggers, and a resume from there would
            # count it again)
            self._write(trainer)

    # ------------------------------------------------------------ the checkpoint
    def last_path(self, trainer: pl.Trainer) -> Path:
        """``last.ckpt`` of the ModelCheckpoint that keeps one, else
        ``<default_root_dir>/checkpoints/last.ckpt``."""
        for cb in trainer.checkpoint_callbacks:
            if isinstance(cb, ModelCheckpoint) and cb.save_last and cb.dirpath:
                return Path(cb.dirpath) / f"{cb.CHECKPOINT_NAME_LAST}{cb.FILE_EXTENSION}"
        return Path(trainer.default_root_dir) / "checkpoints" / "last.ckpt"

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        self.slow.remove()
        if not isinstance(exception, SIGTERMException):
            return
        self._restore_signals()
        if isinstance(exception, StepAbandoned):
            self._write_boundary(trainer)
        elif self._validating:
            # stopped inside a validation of fit (a callback's long loop): a checkpoint from here
            # would resume into half a validation; the last whole one stands
            self._validating = self._held = False
            self.signum = self.signum or signal.SIGTERM
            self.step = int(trainer.global_step)
        elif self.saved is None or self.step != trainer.global_step:
            self._write(trainer)

    def _write_boundary(self, trainer: pl.Trainer) -> None:
        """The abandoned step's boundary, as ``_write`` would have written it there."""
        self.signum = self.signum or signal.SIGTERM
        self.step = int(trainer.global_step)
        self.abandoned = self.step + 1
        boundary = self.slow.take_boundary()
        if boundary is not None:
            path = self.last_path(trainer)
            trainer.strategy.save_checkpoint(boundary, path)  # SafeCheckpointIO
            self.saved = path
            for cb in trainer.checkpoint_callbacks:
                if isinstance(cb, ModelCheckpoint) and cb.save_last:
                    cb.last_model_path = str(path)
            log.info("preempted mid-step %d: wrote %s of step %d", self.abandoned, path, self.step)
        if self._pending is not None:
            signum, handler = self._pending
            self._pending = None
            handler(signum, None)

    def _write(self, trainer: pl.Trainer) -> None:
        """last.ckpt of this step (while fitting, after a first step), then the deferred requeue
        handler."""
        self.signum = self.signum or signal.SIGTERM
        self.step = int(trainer.global_step)
        if trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking and self.step > 0:
            path = self.last_path(trainer)
            # SafeCheckpointIO: atomic, verified, finite
            trainer.save_checkpoint(path, weights_only=False)
            self.saved = path
            for cb in trainer.checkpoint_callbacks:
                if isinstance(cb, ModelCheckpoint) and cb.save_last:
                    cb.last_model_path = str(path)  # metrics.json's last_ckpt
            log.info(
                "preempted by %s at step %d: wrote %s",
                signal.Signals(self.signum).name,
                self.step,
                path,
            )
        # SLURM's requeue (Lightning's SLURMEnvironment, submitit), now at the boundary
        if self._pending is not None:
            signum, handler = self._pending
            self._pending = None
            handler(signum, None)

    def error(self, trainer: pl.Trainer | None, stage: str = "training") -> Preempted:
        """The ``Preempted`` that ends the run, with what was saved and how to resume."""
        signum = int(self.signum or signal.SIGTERM)
        name = signal.Signals(signum).name
        if self.abandoned is not None:
            # a slow step stopped mid-way: the checkpoint is of the step before it
            stopped = f"preempted by {name} at step {self.step}, during step {self.abandoned}"
            if self.saved is not None:
                return Preempted(
                    f"{stopped} (abandoned; reliability.abandon_step_after_s): wrote "
                    f"{self.saved}, a resumable checkpoint of step {self.step}. Resume with "
                    f"ckpt_path={self.saved}; {sweep_advice()}",
                    signum=signum,
                )
            return Preempted(
                f"{stopped} (abandoned): no step had finished, so there is no checkpoint; run it "
                "again to start over",
                signum=signum,
            )
        if self.saved is not None:
            return Preempted(
                f"preempted by {name} at step {self.step}: wrote {self.saved}, a resumable "
                f"checkpoint of this step. Resume with ckpt_path={self.saved}; {sweep_advice()}",
                signum=signum,
            )
        last, step = "", self.step
        if trainer is not None:
            step = int(trainer.global_step)
            existing = self.last_path(trainer)
            last = (
                f"; the last checkpoint is {existing}"
                if existing.is_file()
                else "; there is no checkpoint yet"
            )
        return Preempted(
            f"preempted by {name} at step {step} during {stage}; no checkpoint written{last}. "
            f"Run it again to continue (ckpt_path=<that checkpoint>); {sweep_advice()}",
            signum=signum,
        )


def sweep_advice() -> str:
    """How to re-run the sweep so that each job continues in its own directory: the same command
    with the same ``hydra.sweep.dir`` (a default one holds the start time) plus the ``sweep_resume``
    keys, which no job directory name contains (``src.runs.resume.job_dirname`` leaves them out),
    so the re-run finds the same directories and the report one set of runs."""
    sweep_dir = "<the sweep's directory>"
    try:
        hydra_cfg = HydraConfig.get()
        if hydra_cfg.mode == RunMode.MULTIRUN:
            sweep_dir = str(Path(hydra_cfg.sweep.dir).resolve())
    except ValueError:  # not under Hydra
        pass
    return (
        "a sweep continues its unfinished jobs in the same job directories when the same command "
        f"is run again with hydra.sweep.dir={sweep_dir} sweep_resume.skip_completed=true "
        "sweep_resume.incomplete=last"
    )


def preemption_error(error: BaseException, trainer: pl.Trainer | None) -> Preempted | None:
    """``Preempted`` for Lightning's ``SIGTERMException`` (with what ``Preemption`` saved), else
    None."""
    if not isinstance(error, SIGTERMException):
        return None
    callbacks = trainer.callbacks if trainer is not None else []
    found = next((c for c in callbacks if isinstance(c, Preemption)), None) or Preemption()
    fn = trainer.state.fn if trainer is not None else None
    return found.error(trainer, stage=f"trainer.{fn.value}()" if fn is not None else "setup")
