"""Fault injection for reliability tests: pause a run at a chosen point (so a test can SIGKILL it
exactly there) or poison the loss with NaN at a chosen step. Inert unless asked for.

Two ways to ask:

* the environment (for ``python -m src.train`` subprocesses), read at every hook::

      TLAB_FAULTS="pause_train_step=6"          # after optimizer step 6 completes
      TLAB_FAULTS="pause_val_step=12"           # at the start of the validation at step 12
      TLAB_FAULTS="pause_backward_step=6"       # mid-step 7: its loss computed, backward not begun
      TLAB_FAULTS="pause_save=last.ckpt@12"     # last.ckpt of step 12 written to its .tmp, not yet renamed
      TLAB_FAULTS="nan_loss_step=5"             # the loss of step 5 becomes NaN
      TLAB_FAULTS="raise_train_step=2"          # a RuntimeError (a bug) after optimizer step 2
      TLAB_FAULT_MARKER=/tmp/marker             # written (JSON: what, step) when a pause begins

  every fault needs the ``FaultInjector`` callback: ``+callbacks.faults._target_=tests.faults.FaultInjector``
  (``pause_save`` wraps the rename of ``src.files.atomic_path`` in the run's process: the
  production code has no hook for it);
* constructor arguments of ``FaultInjector`` (in-process tests).

A pause sleeps for an hour: the test is expected to kill the process while it sleeps, or to
signal it and delete the marker file, which ends the pause (tests/callbacks/test_preemption.py).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

from src import files

ENV, MARKER_ENV = "TLAB_FAULTS", "TLAB_FAULT_MARKER"
PAUSE_SECONDS = 3600.0


def active() -> dict[str, str]:
    """``{"pause_train_step": "6", ...}`` from ``$TLAB_FAULTS`` (empty when unset)."""
    spec = os.environ.get(ENV, "")
    return dict(part.split("=", 1) for part in spec.split(",") if "=" in part)


def pause(what: str, step: int) -> None:
    """Write the marker file (if ``$TLAB_FAULT_MARKER``) and sleep, waiting to be killed; the run
    goes on when the test deletes the marker (after sending it a signal such as SIGTERM)."""
    marker = os.environ.get(MARKER_ENV)
    if not marker:
        time.sleep(PAUSE_SECONDS)
        return
    tmp = Path(f"{marker}.tmp")
    tmp.write_text(json.dumps({"what": what, "step": step, "pid": os.getpid()}))
    os.replace(tmp, marker)
    deadline = time.monotonic() + PAUSE_SECONDS
    while Path(marker).exists() and time.monotonic() < deadline:
        time.sleep(0.02)


class FaultInjector(pl.Callback):
    """Pauses training (to be killed), makes one step's loss NaN, or raises a RuntimeError (an
    unexpected exception); arguments override ``$TLAB_FAULTS``.

    nan_loss_step: the forward pass of optimizer step k (0-based ``trainer.global_step`` before the
    update) returns NaN logits, so the loss, the gradients and then the weights become non-finite.
    """

    def __init__(
        self,
        pause_train_step: int | None = None,
        pause_val_step: int | None = None,
        nan_loss_step: int | None = None,
        raise_train_step: int | None = None,
        pause_backward_step: int | None = None,
    ) -> None:
        self.args = {
            "pause_train_step": pause_train_step,
            "pause_val_step": pause_val_step,
            "nan_loss_step": nan_loss_step,
            "raise_train_step": raise_train_step,
            "pause_backward_step": pause_backward_step,
        }
        self._hook: Any = None

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        """``pause_save=<name>[@<step>]``: pause between writing ``<name>``'s temporary file and its rename."""
        want = active().get("pause_save")
        if not want or getattr(files._replace, "fault_injected", False):
            return
        name, _, step = want.partition("@")
        original = files._replace

        def replace(tmp: Path, dest: Path) -> None:
            if dest.name == name and (not step or int(step) == trainer.global_step):
                pause(f"save {dest.name}", trainer.global_step)
            original(tmp, dest)

        replace.fault_injected = True  # type: ignore[attr-defined]
        files._replace = replace

    def _get(self, key: str) -> int | None:
        v = self.args.get(key)
        if v is None:
            v = active().get(key)
        return None if v is None else int(v)

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self._get("nan_loss_step") == trainer.global_step and self._hook is None:
            model = getattr(pl_module, "model", pl_module)

            # the head's output: every path to the loss goes through it, the forward's logits and
            # the chunked training loss alike (objective.loss_chunk_tokens), which skips forward
            def poison(module: torch.nn.Module, args: Any, output: torch.Tensor) -> torch.Tensor:
                return output * float("nan")

            self._hook = model.head.register_forward_hook(poison)

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self._get("pause_train_step") == trainer.global_step:
            pause("train", trainer.global_step)
        if self._get("raise_train_step") == trainer.global_step:
            raise RuntimeError(
                f"injected fault after step {trainer.global_step} (TLAB_FAULTS=raise_train_step)"
            )

    def on_before_backward(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, loss: torch.Tensor
    ) -> None:
        if self._get("pause_backward_step") == trainer.global_step:
            pause("backward", trainer.global_step)

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking and self._get("pause_val_step") == trainer.global_step:
            pause("validation", trainer.global_step)


# ---------------------------------------------------------------- a real full disk


def mount_tmpfs(path: Path, size: str = "200k") -> None:
    """Mount a tmpfs of ``size`` at ``path`` (created): a real file system that fills up. Skips the
    calling test where mounting is not permitted (no root, no CAP_SYS_ADMIN, a container without it)."""
    import shutil
    import subprocess

    import pytest

    path.mkdir(parents=True, exist_ok=True)
    mount = shutil.which("mount")
    if mount is None:
        pytest.skip("no mount command: a real full disk cannot be made here")
    r = subprocess.run(
        [mount, "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here ({r.stderr.strip()[:200]})")


def unmount(path: Path) -> None:
    import subprocess

    subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(path: Path, leave: int = 0) -> None:
    """Fill the file system holding ``path`` until at most ``leave`` bytes are free (one file, ``path/fill``)."""
    import os

    with open(path / "fill", "wb") as f:
        while True:
            st = os.statvfs(path)
            free = st.f_bavail * st.f_frsize
            if free <= leave:
                break
            try:
                f.write(b"\0" * min(free - leave, 4096))
                f.flush()
            except OSError:
                break
