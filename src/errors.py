"""The project's error types, in one place. Each message is written where it is raised (an f-string)
and names the key, the offending value and the fix::

    raise ConfigError(f"model.d_model={d} is not divisible by model.n_head={h}; choose n_head among "
                      "the divisors of d_model")

docs/reliability.md §3 says when each type is raised and what the user does. ``src.cli`` prints
any of them (and every other error class defined in ``src``) as its message alone. They pickle:
joblib/submitit launchers send a job's error back to the sweep process. Imports nothing of ours
(layer 0 of docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any


class ConfigError(ValueError):
    """A run or model config key that cannot work, found before anything heavy is built: the
    config files' keys, the model's numbers and components (an unknown registered name or key),
    the task against the model and data, the trainer against the hardware, ``ckpt_path``, the run
    and output directories; also sampling arguments, and the study, protocol, ``match_params``,
    ``sweep_resume`` and job-slot settings of a sweep."""


class DataError(ValueError):
    """A data input that cannot work (a missing, empty or undecodable file, a corpus shorter than
    one window, prepared tokens of another tokenizer), found before the first step; an evaluation
    file that is missing or a directory."""


class CheckpointError(ValueError):
    """A checkpoint that is unsafe, unreadable, or does not fit the model or the run; or one that
    must not be written (not weights-only, NaN/inf, the disk refused it)."""


class WriteError(OSError):
    """A file this project must not or cannot write: a destination whose directory leads out of its
    output directory through a symlink, or a write the OS refused (a full disk, a quota, a
    read-only place). Raised by ``src.files``, the one writer; the previous file stays whole."""


class HFConversionError(ValueError):
    """A Hugging Face checkpoint or config that cannot be converted exactly."""


class NonFiniteLossError(RuntimeError):
    """Training produced a NaN/inf loss and the run stopped (``reliability.nonfinite``)."""


class Preempted(SystemExit):
    """The run stopped on a preemption signal (SIGTERM, SLURM's requeue signal), after writing a
    resumable checkpoint when it could (``src.callbacks.preemption``); the process exits with
    128 + the signal number (``code``), and ``str()`` is the message."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(128 + int(signum))
        self.message, self.signum = message, int(signum)

    def __str__(self) -> str:
        return self.message

    def __reduce__(
        self,
    ) -> tuple[Any, ...]:  # SystemExit's args hold the exit status, not the message
        return (type(self), (self.message, self.signum))


def did_you_mean(words: str | Iterable[str], accepted: Iterable[str], prefix: str = "") -> str:
    """`` (did you mean model.norm_placement?)`` for the accepted names closest to each misspelt
    word (``difflib``: a ratio of at least 0.6), or ``""`` when none is close. ``prefix`` is put
    before each suggestion (``"model."``), so the hint is a key the user can type."""
    choices = [str(a) for a in accepted]
    found: list[str] = []
    for word in [words] if isinstance(words, str) else list(words):
        for match in difflib.get_close_matches(str(word), choices, n=2, cutoff=0.6):
            if f"{prefix}{match}" not in found:
                found.append(f"{prefix}{match}")
    return f" (did you mean {' or '.join(found)}?)" if found else ""


def check_keys(
    given: Mapping[str, Any],
    accepted: Iterable[str],
    *,
    where: str,
    prefix: str = "",
    shown: Iterable[str] | None = None,
    error: type[ValueError] = ConfigError,
) -> None:
    """Every unknown key of a config node in one wording, wherever keys are checked::

        optim.lrr=0.1 is not a key of optim=adamw (did you mean optim.lr?) (accepted: lr, betas,
        …); fix the spelling or remove the override

    ``where`` names the node (``optim=adamw``, ``model/position=rope``, ``the run config``),
    ``prefix`` makes each key one the user can type (``optim.``), ``shown`` is the list the message
    gives when it differs from ``accepted`` (keys a builder fills in itself), and ``error`` the
    type raised (``DataError`` for a data node)."""
    accepted = [str(a) for a in accepted]
    unknown = [k for k in given if str(k) not in accepted]
    if not unknown:
        return
    items = ", ".join(f"{prefix}{k}={given[k]!r}" for k in unknown)
    verb = "is not a key" if len(unknown) == 1 else "are not keys"
    listed = ", ".join(str(s) for s in (accepted if shown is None else shown)) or "no keys"
    raise error(
        f"{items} {verb} of {where}{did_you_mean([str(k) for k in unknown], accepted, prefix)} "
        f"(accepted: {listed}); fix the spelling or remove the override"
    )
