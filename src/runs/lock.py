"""One live job per run directory, held before Hydra writes into it.

With jobs running at once (``hydra/launcher=joblib``, two copies of a sweep, a resubmitted SLURM
array, two ``python -m src.train`` with one ``hydra.run.dir``), two jobs can be handed the same
directory: a sweep whose ``hydra.sweep.subdir`` leaves out a key that varies, or the same command
started twice. ``sweep_resume`` would then take the other job's half-written files for an
interrupted attempt and archive them under its feet. The directory itself is locked
(``fcntl.flock`` on its descriptor: nothing is written, nothing moves when an attempt is
archived) for the whole job, and a second job finding it held stops at once with an error naming
the directory.

When the lock is taken matters: Hydra writes ``.hydra/config.yaml``, ``hydra.yaml`` and
``overrides.yaml`` into the directory before the task function runs. A single run takes the lock
earlier, in the ``OutputDirCheck`` Hydra callback's ``on_run_start`` (``take_run_dir``), so a
second run stops before Hydra writes anything; ``hold_run_dir`` (around the job in ``src.train``)
then keeps that same lock. A sweep job's directory is known only inside Hydra's ``run_job``,
after the write: its ``hold_run_dir`` remembers the ``.hydra`` files it found on taking the lock
(its own) and writes them back when the job ends if another job's refused start overwrote them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from src.errors import ConfigError
from src.files import atomic_write

HYDRA_FILES = (
    "config.yaml",
    "hydra.yaml",
    "overrides.yaml",
)  # what Hydra writes under <run dir>/.hydra
_HELD: dict[
    str, int
] = {}  # realpath of a run directory -> the descriptor this process holds its lock on
_BEFORE: dict[
    str, dict[str, bytes]
] = {}  # realpath -> its .hydra files when take_run_dir locked it (before Hydra)
_OWN: dict[
    str, dict[str, bytes]
] = {}  # realpath -> the .hydra files hold_run_dir keeps until the job ends


def _is_rank_zero() -> bool:  # ranks > 0 of a DDP job share rank 0's directory and its lock
    return all(os.environ.get(k, "0") == "0" for k in ("RANK", "LOCAL_RANK", "SLURM_PROCID"))


def take_run_dir(run_dir: str | Path) -> None:
    """Lock ``run_dir`` for this process (creating it) until ``hold_run_dir`` releases it;
    ``ConfigError`` naming the directory if another job holds it. A no-op on ranks > 0 and when
    already held here."""
    if not _is_rank_zero():
        return
    path = Path(run_dir)
    path.mkdir(parents=True, exist_ok=True)
    key = os.path.realpath(path)
    if key in _HELD:
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ConfigError(
            f"{path} is in use by another running job: two jobs of a sweep were given one "
            f"directory (hydra.sweep.subdir must tell every job apart, e.g. "
            f"${{sweep_subdir:${{hydra.job.override_dirname}}}} without excluding a key that "
            f"varies), the same sweep runs twice at once, or another run has hydra.run.dir={path}; "
            f"give this run another hydra.run.dir, or wait for the other to end"
        ) from None
    _HELD[key] = fd
    _BEFORE[key] = _hydra_files(path)


def restore_hydra_files(run_dir: str | Path) -> list[str]:
    """Put back the ``.hydra`` files ``run_dir`` had when ``take_run_dir`` locked it (before Hydra
    wrote this job's): for a job refused after Hydra's write, so the directory's earlier run keeps
    its saved config. Returns the names restored; none when the lock was taken after Hydra's write
    (a sweep job)."""
    path = Path(run_dir)
    before = _BEFORE.get(os.path.realpath(path))
    if before is None:
        return []
    _OWN[os.path.realpath(path)] = before  # what hold_run_dir keeps from now on
    restored = []
    for name in HYDRA_FILES:
        target = path / ".hydra" / name
        if name in before:
            atomic_write(target, before[name], root=path)
            restored.append(name)
        else:
            target.unlink(missing_ok=True)
    return restored


def release_run_dir(run_dir: str | Path) -> None:
    """Release this process's lock of ``run_dir`` (if it holds one)."""
    _BEFORE.pop(os.path.realpath(run_dir), None)
    fd = _HELD.pop(os.path.realpath(run_dir), None)
    if fd is not None:
        os.close(fd)  # releases the lock


def _hydra_files(path: Path) -> dict[str, bytes]:
    out = {}
    for name in HYDRA_FILES:
        with contextlib.suppress(OSError):
            out[name] = (path / ".hydra" / name).read_bytes()
    return out


@contextlib.contextmanager
def hold_run_dir(run_dir: str | Path) -> Iterator[None]:
    """Hold ``run_dir`` for the duration (rank 0 only); ``ConfigError`` if another job holds it. On
    leaving, ``.hydra/*.yaml`` are what they were when the lock was taken (module docstring)."""
    if not _is_rank_zero():
        yield
        return
    path = Path(run_dir)
    take_run_dir(path)
    key = os.path.realpath(path)
    _OWN[key] = _hydra_files(path)
    try:
        yield
    finally:
        try:
            for name, data in _OWN.pop(key, {}).items():
                if _hydra_files(path).get(name) != data:
                    atomic_write(path / ".hydra" / name, data, root=path)
        finally:
            release_run_dir(path)
