"""Several sweep jobs at once on one machine: each job gets its share of the CPUs and GPUs.

``hydra/launcher=joblib`` (hydra-joblib-launcher) runs up to ``hydra.launcher.n_jobs`` jobs at
once, each in a worker process of a loky pool. Left alone, every job's torch starts one
thread per core (``n_jobs`` × cores threads spinning against each other) and every job sees
every GPU (they all land on GPU 0). ``pin_job`` (called first thing by ``src.train``) gives
the worker process one of ``n_jobs`` *slots* and pins it:

* **CPU**: the cores this process may use (``os.sched_getaffinity``) are split into ``n_jobs``
  contiguous groups; slot k is bound to group k (``os.sched_setaffinity``) and torch uses that
  many intra-op threads (``OMP_NUM_THREADS`` too, for child processes). An explicit
  ``cpu_threads`` still sets the thread count.
* **GPU**: the visible GPUs (``CUDA_VISIBLE_DEVICES``, else all) are split the same way and
  slot k gets ``CUDA_VISIBLE_DEVICES=<its GPUs>``: one GPU per job with ``n_jobs`` = the GPU
  count (``trainer.devices=auto`` then sees just that one; with 8 GPUs and ``n_jobs=4`` each job
  gets 2, and DDP ranks started by Lightning inherit them). More jobs than GPUs is an error,
  unless the trainer is on CPU. This must happen before CUDA is initialised in the process:
  nothing before ``pin_job`` touches CUDA (``torch.cuda.device_count`` reads NVML).

A slot is a lock file ``<sweep dir>/.slots/<k>.lock`` held (``fcntl.flock``) by the worker process
for its whole life, so no two live workers share one, a worker keeps its slot (and its CUDA devices)
for every job it runs, and a worker that dies frees its slot. A job that finds every slot held waits
(``SLOT_WAIT_S``) for one, then fails naming the pids that hold them (an orphaned worker of a sweep
stopped by killing its parent rather than its process group: kill it). Outside the joblib launcher
``pin_job`` does nothing."""

from __future__ import annotations

import fcntl
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from src.errors import ConfigError

log = logging.getLogger(__name__)

SLOTS_DIR = ".slots"
#: how long a job waits for a slot before giving up (a worker of a sweep just stopped may still be
#: finishing its job). The error then names the pids holding the slots: measured in study 1, an
#: orphaned loky worker of a sweep stopped by killing its parent (not its process group) kept
#: training and held a slot, and every job of the next sweep into that directory failed at once
SLOT_WAIT_S = 60.0
ENV_SLOT = "TRANSFORMER_LAB_JOB_SLOT"  # "k/n": set in the worker, read by tests and child processes


@dataclass(frozen=True)
class Slot:
    index: int  # 0 .. count-1
    count: int  # jobs at once (hydra.launcher.n_jobs, resolved)
    cpus: tuple[int, ...]
    # CUDA device ids given to this slot; None on a machine without GPUs
    gpus: tuple[str, ...] | None


_held: tuple[Slot, int] | None = None  # this process's slot and the descriptor of its lock


def split(items: list[Any], index: int, count: int) -> list[Any]:
    """Contiguous group ``index`` of ``count`` near-equal groups of ``items`` (at least one item
    when there are fewer items than groups: groups then share, round robin)."""
    if len(items) < count:
        return [items[index % len(items)]] if items else []
    share, extra = divmod(len(items), count)
    start = index * share + min(index, extra)
    return items[start : start + share + (index < extra)]


def joblib_slots(hydra_cfg: Any) -> tuple[int, Path] | None:
    """(jobs at once, sweep dir) when this job runs under hydra-joblib-launcher, else None."""
    launcher = getattr(hydra_cfg, "launcher", None)
    target = str(launcher.get("_target_", "")) if launcher is not None else ""
    if "hydra_joblib_launcher" not in target:
        return None
    from joblib import effective_n_jobs

    n = int(effective_n_jobs(int(launcher.get("n_jobs", -1))))  # -1 = one per CPU, as joblib counts
    return max(1, n), Path(str(hydra_cfg.sweep.dir))


def _try_claim(lock_dir: Path, count: int) -> tuple[int, int] | None:
    for k in range(count):
        fd = os.open(lock_dir / f"{k}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return k, fd
    return None


def _holders(lock_dir: Path, count: int) -> str:
    pids = []
    for k in range(count):
        try:
            pids.append((lock_dir / f"{k}.lock").read_text().strip() or "?")
        except OSError:
            pids.append("?")
    return ", ".join(pids)


def _claim(lock_dir: Path, count: int, wait_s: float | None = None) -> tuple[int, int]:
    """A free slot, waiting up to ``wait_s`` (default ``SLOT_WAIT_S``) for one; then a
    ``ConfigError`` naming the pids that hold them."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    wait_s = SLOT_WAIT_S if wait_s is None else wait_s
    deadline = time.monotonic() + wait_s
    got = _try_claim(lock_dir, count)
    if got is None and wait_s > 0:
        log.info(
            "all %d job slots in %s are held (pids %s); waiting up to %.0f s for one to be "
            "released",
            count,
            lock_dir,
            _holders(lock_dir, count),
            wait_s,
        )
    while got is None and time.monotonic() < deadline:
        time.sleep(0.2)
        got = _try_claim(lock_dir, count)
    if got is None:
        raise ConfigError(
            f"all {count} job slots in {lock_dir} are held by live processes (pids "
            f"{_holders(lock_dir, count)}) after {wait_s:.0f} s: more jobs run at once than "
            f"hydra.launcher.n_jobs={count}; is another sweep running into the same "
            "hydra.sweep.dir?"
        )
    return got


def _visible_gpus() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]  # NVML: does not initialise CUDA


def pin_job(
    hydra_cfg: Any, accelerator: str = "auto", cpu_threads: int | None = None
) -> Slot | None:
    """Give this process its slot and pin it (module docstring); None outside the joblib
    launcher."""
    global _held
    found = joblib_slots(hydra_cfg)
    if found is None:
        return None
    # a worker's first job; its later jobs keep the slot, the pinning and the devices
    if _held is None:
        _held = _claim_and_pin(*found, accelerator=accelerator)
    slot = _held[0]
    threads = int(cpu_threads) if cpu_threads else len(slot.cpus)
    import torch

    torch.set_num_threads(threads)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    log.info(
        "job slot %d/%d: CPUs %s, %d torch thread(s)%s",
        slot.index,
        slot.count,
        list(slot.cpus),
        threads,
        f", CUDA_VISIBLE_DEVICES={','.join(slot.gpus)}" if slot.gpus is not None else "",
    )
    return slot


def _claim_and_pin(count: int, sweep_dir: Path, accelerator: str) -> tuple[Slot, int]:
    cpus = sorted(os.sched_getaffinity(0))
    gpus = _visible_gpus() if accelerator != "cpu" else []
    if gpus and len(gpus) < count:
        raise ConfigError(
            f"hydra.launcher.n_jobs={count} jobs at once but {len(gpus)} GPU(s) visible: set "
            f"hydra.launcher.n_jobs={len(gpus)} (one GPU per job), or trainer=cpu to run the jobs "
            "on CPUs"
        )
    index, fd = _claim(sweep_dir / SLOTS_DIR, count)
    slot = Slot(
        index,
        count,
        tuple(split(cpus, index, count)),
        tuple(split(gpus, index, count)) if gpus else None,
    )
    os.sched_setaffinity(0, slot.cpus)
    if slot.gpus is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(slot.gpus)
    os.environ[ENV_SLOT] = f"{index}/{count}"
    return slot, fd
