"""The entry points' one decorator, and errors at the command line: ours print as one message,
everything else keeps its traceback.

Every Hydra entry point is written the same way::

    @hydra_entry("train")                  # conf/train.yaml
    def main(cfg):
        from src.training.runner import train   # the heavy stack loads here, not at import
        return train(cfg)

    if __name__ == "__main__":
        main()

``main()`` first runs the command line's cheap checks (``src.config.preflight``: YAML limits, a
misspelt key or group value with the closest accepted names, a missing Hydra plugin), which need
only Hydra and OmegaConf, then hands over to ``@hydra.main``; the task function runs inside
``clean_errors()``:

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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import hydra
from hydra.errors import CompactHydraException

from src.config.preflight import preflight
from src.errors import Preempted

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"

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


def hydra_entry(config_name: str) -> Callable[[Callable[[Any], Any]], Callable[..., Any]]:
    """An entry point on ``conf/<config_name>.yaml`` (module docstring). The decorated ``main``
    takes an optional ``argv`` (default ``sys.argv[1:]``): the preflight checks read it, then Hydra
    composes it once per job."""

    def decorate(task_function: Callable[[Any], Any]) -> Callable[..., Any]:
        composed = hydra.main(
            config_path=str(CONF_DIR), config_name=config_name, version_base="1.3"
        )(cleanly(task_function))

        @functools.wraps(task_function)
        def main(argv: Sequence[str] | None = None) -> Any:
            args = list(sys.argv[1:] if argv is None else argv)
            preflight(config_name, args)
            sys.argv = [sys.argv[0], *args]
            return composed()

        return main

    return decorate
