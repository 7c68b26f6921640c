"""Errors at the command line: ours print as one message, everything else keeps its traceback.

Every entry point runs its work inside ``clean_errors()``::

    @hydra.main(config_path="../conf", config_name="train", version_base="1.3")
    def main(cfg):
        with clean_errors():
            return train(cfg)

* **Our own errors** (exception classes defined in the ``src`` package: those of ``src.errors``
  (``ConfigError``, ``DataError``, ``CheckpointError``, ``HFConversionError``,
  ``NonFiniteLossError``) and the few kept beside their code (``PositionLimitError``,
  ``PowerLawError``), whose messages name the key, the value and the fix) are re-raised as
  ``CommandError``, a ``hydra.errors.CompactHydraException``: Hydra's ``run_and_report`` prints
  a compact exception as its message alone (after its own line naming the job's overrides) and
  exits with status 1. In a multirun the job's ``metrics.json`` keeps the original error, the
  other jobs still run, and the first failure is printed when the sweep ends.
* **Everything else** (a bug, torch, an OS error) is left alone: Hydra prints it with its
  traceback, as before.
* ``HYDRA_FULL_ERROR=1`` (Hydra's own switch) leaves our errors alone too, so they come with
  Hydra's complete stack trace.
* ``Preempted`` (SIGTERM / SLURM's signal, ``src.callbacks.preemption``) prints its message to
  stderr and exits with 128 + the signal number.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from hydra.errors import CompactHydraException

from src.errors import Preempted

FULL_ERROR_ENV = "HYDRA_FULL_ERROR"


class CommandError(CompactHydraException):
    """One of our errors, printed by Hydra as its message alone (exit status 1). Kept here: it is
    how ``clean_errors`` tells Hydra to print one line, not an error of its own."""


def is_ours(error: BaseException) -> bool:
    """Whether ``error``'s class is defined in the ``src`` package."""
    module = type(error).__module__ or ""
    return module == "src" or module.startswith("src.")


def full_error_requested() -> bool:
    """``HYDRA_FULL_ERROR=1``: Hydra's switch for complete stack traces (hydra._internal.utils)."""
    return os.environ.get(FULL_ERROR_ENV) == "1"


@contextlib.contextmanager
def clean_errors() -> Iterator[None]:
    """Our errors as one clear message, others untouched (module docstring)."""
    try:
        yield
    except Preempted as e:
        sys.stderr.write(f"{e}\n")
        raise
    except Exception as e:
        if not is_ours(e) or full_error_requested():
            raise
        raise CommandError(f"{type(e).__name__}: {e}") from e


def cleanly(task_function: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``task_function`` run inside ``clean_errors()``; for a function that is not the ``__main__``
    module's (Hydra names the job after ``__module__``, which ``functools.wraps`` keeps)."""

    @functools.wraps(task_function)
    def wrapped(cfg: Any) -> Any:
        with clean_errors():
            return task_function(cfg)

    return wrapped
