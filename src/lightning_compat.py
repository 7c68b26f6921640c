"""Every use of Lightning's private API, in one place, each pinned by
tests/test_lightning_compat.py.

Lightning offers no public way to do these things; each function says what it reads or
writes and what happens where a release lacks it. When a Lightning upgrade breaks one, the
test named beside it fails with the attribute that moved, and only this file changes.

* ``should_update_logs``: the trainer's "loggers write this step" decision
  (``trainer._logger_connector.should_update_logs``);
* ``set_received_sigterm``: the flag behind the public ``trainer.received_sigterm``
  (``trainer._signal_connector.received_sigterm``);
* ``precision_inputs``: the accepted ``trainer.precision`` values (the ``_PRECISION_INPUT_*``
  type aliases);
* ``replace_ddp_child_command``: the function Lightning's subprocess DDP launcher calls to build
  a Hydra app's child command (``subprocess_script._hydra_subprocess_cmd``);
* ``attached_trainer``: a LightningModule's trainer, or None outside one (``module._trainer``:
  the public ``module.trainer`` raises when detached);
* ``logged_as_last_fit_step``: the step the loggers get for a validation run after ``fit``
  (``trainer.fit_loop.epoch_loop._batches_that_stepped``);
* ``checkpoint_in_memory``: the dict ``trainer.save_checkpoint`` would write, without writing it
  (``trainer._checkpoint_connector.dump_checkpoint``).

One subclass override is pinned by the same test but lives with its class:
``TokensPerSecondBar._get_train_description`` (src/callbacks/throughput.py), which keeps
Lightning's rich bar from printing ``Epoch 0/-2`` for runs counted in steps.
"""

from __future__ import annotations

import contextlib
import typing
from collections.abc import Callable, Iterator, Sequence
from typing import Any


def should_update_logs(trainer: Any) -> bool:
    """Whether Lightning's loggers write the current step (every ``log_every_n_steps`` optimizer
    steps, every step under ``fast_dev_run``). Where a release lacks the private flag: True, i.e.
    log and time every step as Lightning's defaults do (slower, same values)."""
    connector = getattr(trainer, "_logger_connector", None)
    flag = getattr(connector, "should_update_logs", None)
    return True if flag is None else bool(flag)


def attached_trainer(module: Any) -> Any:
    """The Trainer ``module`` (a LightningModule) is attached to, or None (built alone, a
    checkpoint being loaded, a test calling it directly)."""
    return module._trainer


def set_received_sigterm(trainer: Any, received: bool) -> None:
    """Set the flag ``trainer.received_sigterm`` reads (Lightning stops at the next step boundary
    while it is set); raises AttributeError where a release has moved it."""
    trainer._signal_connector.received_sigterm = received


def precision_inputs() -> list[str]:
    """Every value Lightning accepts for ``trainer.precision``, as strings."""
    from lightning.fabric.plugins.precision.precision import (
        _PRECISION_INPUT_INT,
        _PRECISION_INPUT_STR,
        _PRECISION_INPUT_STR_ALIAS,
    )

    return [
        str(p)
        for p in (
            *typing.get_args(_PRECISION_INPUT_STR),
            *typing.get_args(_PRECISION_INPUT_STR_ALIAS),
            *typing.get_args(_PRECISION_INPUT_INT),
        )
    ]


def replace_ddp_child_command(command: Callable[[int], tuple[Sequence[str], str]]) -> int:
    """Make Lightning's subprocess DDP launchers (pytorch and fabric) build a Hydra app's child
    command with ``command(local_rank) -> (argv, cwd)``; returns how many launchers were patched
    (0 where a release has no such hook: ranks > 0 then re-run ``sys.argv`` as Lightning does)."""
    import lightning.fabric.strategies.launchers.subprocess_script as fabric_launcher
    import lightning.pytorch.strategies.launchers.subprocess_script as pl_launcher

    patched = 0
    for module in (pl_launcher, fabric_launcher):
        if hasattr(module, "_hydra_subprocess_cmd"):
            module._hydra_subprocess_cmd = command  # type: ignore[attr-defined]
            patched += 1
    return patched


@contextlib.contextmanager
def logged_as_last_fit_step(trainer: Any) -> Iterator[None]:
    """Inside the block (a ``trainer.validate`` right after ``fit``), metrics are logged at the step
    a validation inside the fit's last optimizer step would have used (``global_step - 1``, as
    Lightning logs the fit's validations), not one past it; the counter is restored after."""
    loop = trainer.fit_loop.epoch_loop
    before = loop._batches_that_stepped
    loop._batches_that_stepped = max(0, before - 1)
    try:
        yield
    finally:
        loop._batches_that_stepped = before


def checkpoint_in_memory(trainer: Any) -> dict[str, Any]:
    """The checkpoint ``trainer.save_checkpoint`` would write now (the same hooks run), as a dict
    in memory; ``trainer.strategy.save_checkpoint(dict, path)`` writes it later. Its tensors are the
    live parameters and optimizer states (no copy); raises AttributeError where a release has moved
    the connector."""
    return trainer._checkpoint_connector.dump_checkpoint(weights_only=False)
