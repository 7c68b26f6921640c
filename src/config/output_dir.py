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
the one Hydra then uses (``${now:...}`` is resolved once).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from src.errors import ConfigError


def check_output_dir(path: str | os.PathLike[str], key: str) -> Path:
    """Create ``path`` (with its parents) and prove it writable; ``ConfigError`` naming ``key`` otherwise."""
    p = Path(path).expanduser()
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{key}={p} is an existing file, not a directory; give a directory (it is created if "
                          f"needed), e.g. {key}={p}_run")
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(f"{key}={p} cannot be created: {parent} is a file, not a directory; give a "
                                  "directory outside it")
            break
    probe = p / f".write-check-{os.getpid()}"
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        reason = f"{e.strerror or type(e).__name__}: {e.filename or p}"
        raise ConfigError(f"{key}={p} cannot be created or written ({reason}); give a directory you can write to, "
                          f"e.g. {key}=outputs/my_run") from None
    return p


class OutputDirCheck(Callback):
    """Hydra callback: ``check_output_dir`` on ``hydra.run.dir`` / ``hydra.sweep.dir`` before any job."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(config, "hydra.run.dir")

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
