"""The run directory can be created and written, checked before anything runs.

Hydra creates ``hydra.run.dir`` (or ``hydra.sweep.dir``) itself, just before it calls the
task function, and an impossible path (``hydra.run.dir=/proc/x``, an existing file, a path under
a file, a read-only or unwritable place) ends there in a raw ``OSError`` traceback. The
``OutputDirCheck`` Hydra callback (``hydra.callbacks.output_dir_check`` in
``conf/hydra/default.yaml``, ``conf/eval.yaml``, ``conf/inspect_attention.yaml``) runs first, in
``on_run_start`` / ``on_multirun_start``: it creates the directory and writes (then removes) a
probe file in it, so every reason the OS may have is found, and ends the process with one
message naming the key, the path, the reason and the fix (exit status 1; Hydra turns an
exception raised by a callback into a warning, so the callback exits itself). The directory is
the one Hydra then uses (``${now:...}`` is resolved once). The probe is 64 KiB, fsynced: a disk with
a few bytes free fails here, not in Hydra's own write of ``.hydra/config.yaml`` (which left an empty
file at 0 bytes free).

With ``hold_run_dir: true`` (``conf/hydra/default.yaml``, for ``src.train``) a single run also takes
the run directory's lock here, before Hydra writes ``.hydra/`` into it: a second run given the same
``hydra.run.dir`` stops with the lock's error and leaves the first run's saved config alone
(``src.runs.lock``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from src.errors import ConfigError
from src.runs.lock import restore_hydra_files, take_run_dir

PROBE_BYTES = 64 * 1024  # more than Hydra's .hydra/*.yaml of any run (a few KiB each)


def check_output_dir(path: str | os.PathLike[str], key: str) -> Path:
    """Create ``path`` (with its parents) and prove it writable; ``ConfigError`` naming ``key``
    otherwise."""
    p = Path(path).expanduser()
    if p.exists() and not p.is_dir():
        raise ConfigError(
            f"{key}={p} is an existing file, not a directory; give a directory (it is created if "
            f"needed), e.g. {key}={p}_run"
        )
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(
                    f"{key}={p} cannot be created: {parent} is a file, not a directory; give a "
                    "directory outside it"
                )
            break
    probe = p / f".write-check-{os.getpid()}"
    try:
        p.mkdir(parents=True, exist_ok=True)
        try:
            with open(probe, "wb") as f:
                f.write(b"\0" * PROBE_BYTES)
                f.flush()
                os.fsync(f.fileno())
        finally:
            probe.unlink(missing_ok=True)
    except OSError as e:
        reason = f"{e.strerror or type(e).__name__}: {e.filename or p}"
        raise ConfigError(
            f"{key}={p} cannot be created or written ({reason}); give a directory you can write "
            f"to, e.g. {key}=outputs/my_run"
        ) from None
    return p


class OutputDirCheck(Callback):
    """Hydra callback: ``check_output_dir`` on ``hydra.run.dir`` / ``hydra.sweep.dir`` before any
    job; with ``hold_run_dir`` a single run's directory is locked there too (module docstring)."""

    def __init__(self, hold_run_dir: bool = False) -> None:
        self.hold_run_dir = bool(hold_run_dir)

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(config, "hydra.run.dir")
        if self.hold_run_dir:
            value = OmegaConf.select(config, "hydra.run.dir")
            try:
                # kept by src.train's hold_run_dir, released when the job ends
                take_run_dir(str(value))
            except ConfigError as e:
                raise SystemExit(f"hydra.run.dir={value}: {e}") from None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(config, "hydra.sweep.dir")

    @staticmethod
    def _check(config: DictConfig, key: str) -> None:
        value = OmegaConf.select(config, key)
        if value is None or str(value) in ("", "."):
            return
        try:
            check_output_dir(str(value), key)
        except ConfigError as e:
            raise SystemExit(str(e)) from None  # printed to stderr, exit status 1


def previous_run_files(run_dir: str | os.PathLike[str]) -> list[Path]:
    """What a finished or interrupted run left in ``run_dir``: checkpoints, CSV logs,
    metrics.json."""
    d = Path(run_dir)
    found = [
        *sorted(d.glob("checkpoints/*.ckpt")),
        *sorted(d.glob("csv/version_*")),
        *[d / "metrics.json"],
    ]
    return [f for f in found if f.exists()]


def check_run_dir_unused(run_dir: str | os.PathLike[str], ckpt_path: Any) -> None:
    """A new run (no ``ckpt_path``) refuses a directory that holds another run's files: Lightning
    would write ``last-v1.ckpt`` beside the old ``last.ckpt`` and a second CSV history beside the
    first, and the report would read them as one run. A resume (``ckpt_path=…``) continues the run
    in place."""
    # SLURM's requeued job: Lightning resumes it itself
    if ckpt_path or any(Path(run_dir).glob("hpc_ckpt_*.ckpt")):
        return
    found = previous_run_files(run_dir)
    if found:
        shown = ", ".join(str(f.relative_to(run_dir)) for f in found[:4]) + (
            " …" if len(found) > 4 else ""
        )
        # Hydra has just written this run's .hydra/ over the old run's
        kept = restore_hydra_files(run_dir)
        last = Path(run_dir) / "checkpoints" / "last.ckpt"
        resume = f"resume it with ckpt_path={last}; " if last.is_file() else ""
        raise ConfigError(
            f"hydra.run.dir={run_dir} already holds a run ({shown}); a new run there would mix its "
            f"checkpoints and CSV history with the old ones. {resume}or give this run a new "
            "directory (hydra.run.dir=...), or move the old files away"
            + (f" (its .hydra/{', '.join(kept)} are kept as they were)" if kept else "")
        )
