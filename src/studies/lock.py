"""One live job per run directory.

With jobs running at once (``hydra/launcher=joblib``, two copies of a sweep, a resubmitted SLURM
array), two jobs can be handed the same directory: a sweep whose ``hydra.sweep.subdir``
leaves out a key that varies, or the same sweep started twice. ``sweep_resume`` would then
take the other job's half-written files for an interrupted attempt and archive them under
its feet. ``hold_run_dir`` locks the directory itself (``fcntl.flock`` on its descriptor:
nothing is written, nothing moves when an attempt is archived) for the whole job, and a
second job finding it held stops at once with an error naming the directory.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from src.errors import ConfigError


def _is_rank_zero() -> bool:  # ranks > 0 of a DDP job share rank 0's directory and its lock
    return all(os.environ.get(k, "0") == "0" for k in ("RANK", "LOCAL_RANK", "SLURM_PROCID"))


@contextlib.contextmanager
def hold_run_dir(run_dir: str | Path) -> Iterator[None]:
    """Hold ``run_dir`` for the duration (rank 0 only); ``ConfigError`` if another job holds it."""
    if not _is_rank_zero():
        yield
        return
    path = Path(run_dir)
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"{path} is in use by another running job: two jobs of a sweep were given one "
                              f"directory (hydra.sweep.subdir must tell every job apart, e.g. "
                              f"${{sweep_subdir:${{hydra.job.override_dirname}}}} without excluding a key that "
                              f"varies), or the same sweep runs twice at once") from None
        yield
    finally:
        os.close(fd)  # releases the lock
