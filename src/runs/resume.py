"""Re-running a sweep completes only the jobs that did not finish.

Two pieces make a Hydra multirun resumable:

1. **A deterministic job directory.** Hydra numbers jobs (``hydra.sweep.subdir=${hydra.job.num}``),
   which says nothing about what a job ran. The study configs use
   ``${sweep_subdir:${hydra.job.override_dirname}}`` instead: the job's own overrides
   (``model.position=rope,seed=1``; ``/`` of group overrides becomes ``.``, long names are
   shortened with a hash), so the same sweep point always lands in the same directory.

2. **A check at the start of each job** (``skip_completed``, called by ``src.train``): with
   ``sweep_resume.skip_completed: true``, a job whose directory holds ``metrics.json`` with
   ``status: completed`` *and* a fingerprint of the same resolved config returns the stored
   result without training. Any other job runs: the files of a previous attempt (failed,
   interrupted, or run with a different config) move to ``attempts/<n>/`` first so the new
   attempt starts clean and the report never mixes two attempts' logs — or, with
   ``sweep_resume.incomplete: last``, the job continues from the attempt's
   ``checkpoints/last.ckpt`` (exact-batch resume, see docs/data.md). A job that *diverged*
   (failed with a non-finite loss, ``src.studies.outcomes``) with the same config is a result
   too: it fails again at once with its stored error. Re-running it would re-roll only the
   failures, which biases a variant's diverged share down: at the edge of stability a run can
   diverge on one machine and train on another (measured: study 1's ReZero at lr 3e-2, seed 0,
   diverged at step 54 in one session and trained in the next; the two CPUs' step-0 gradients
   already differed in the 7th digit).

The stamp (``.sweep_job.json``) holds the resolved config without ``paths``, ``ckpt_path``,
``sweep_resume`` and a study's ``protocol``/``report`` nodes (how the runs are read, not what they
compute; ``protocol.stage`` is in the job's directory name), the run directory's path replaced by a
placeholder, and its SHA-256. Every job of a multirun writes it, with or without ``skip_completed``,
so a sweep first run without ``sweep_resume`` and re-run with it (the advice a preempted job prints,
``src.callbacks.preemption``) skips its finished jobs and continues the preempted one in the same
directories (``sweep_resume.*`` is never part of a directory's name). A completed job is skipped
when the config is the same, or differs only by keys that were added or removed (a new default in
``conf/`` such as ``num_workers: 0`` is not a new experiment); a changed *value* of any key present
in both (a study's ``max_steps``, a learning rate), a null that became a node
(``model.position.scaling: null`` -> ``{name: yarn, …}``) or a node that became a leaf, re-runs the
job instead of silently reusing a stale result. Both cases are logged with the keys involved."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from src.errors import ConfigError, NonFiniteLossError, check_keys
from src.files import atomic_write
from src.jsonfile import METRICS, read_json
from src.runs.divergence import is_divergence

log = logging.getLogger(__name__)

STAMP = ".sweep_job.json"
ATTEMPTS = "attempts"
KEEP = {
    ".hydra",
    STAMP,
    ATTEMPTS,
}  # never archived (Hydra rewrites .hydra itself for every attempt)
INCOMPLETE_MODES = ("restart", "last")
MAX_DIRNAME = 120
#: top-level keys that describe how a study reads its runs, not what a run computes: more seeds or
#: candidates in ``protocol``, another ``report.equivalence_margin`` must not re-run completed jobs
#: (docs/studies.md)
NOT_TRAINING = ("protocol", "report")
#: ``sweep_resume.<key>=<value>`` in an override_dirname: how a sweep is re-run, never part of a
#: job's name
_RESUME_ITEM = re.compile(r"^\+*sweep_resume\.[A-Za-z_]+=[A-Za-z0-9_]*$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+~@%:\-\[\]{}]")


def job_dirname(override_dirname: Any = "", max_len: int = MAX_DIRNAME) -> str:
    """A directory name from Hydra's ``override_dirname`` (``model/position=rope,seed=1`` ->
    ``model.position=rope,seed=1``); empty -> ``default``; too long -> a prefix plus a hash."""
    text = "" if override_dirname is None else str(override_dirname)
    # see _RESUME_ITEM
    text = ",".join(item for item in text.split(",") if not _RESUME_ITEM.match(item))
    name = _UNSAFE.sub("_", text.replace("/", "."))
    if not name:
        return "default"
    if len(name) > max_len:
        digest = hashlib.sha1(text.encode()).hexdigest()[:10]
        name = f"{name[: max_len - 11]}-{digest}"
    return name


def register_resolvers() -> None:
    """``${sweep_subdir:<text>}`` -> ``job_dirname(text)`` (idempotent)."""
    if not OmegaConf.has_resolver("sweep_subdir"):
        OmegaConf.register_new_resolver("sweep_subdir", job_dirname)


@dataclass
class Completed:
    """A job that finished in an earlier run of the sweep."""

    run_dir: Path
    value: float | None  # the stored optimized metric (best val/loss), returned to the sweeper
    metrics: dict[str, Any]


def _fingerprinted_text(cfg: DictConfig | dict[str, Any], run_dir: str | Path | None = None) -> str:
    """The resolved config as sorted JSON, less ``paths``/``ckpt_path``/``sweep_resume``/``hydra``
    and the study's ``protocol``/``report`` nodes, with the run directory written as
    ``<run_dir>``."""
    if isinstance(cfg, DictConfig):
        try:
            plain = OmegaConf.to_container(cfg, resolve=True)
        except Exception:  # an interpolation that only resolves later: use the raw text
            plain = OmegaConf.to_container(cfg, resolve=False)
    else:
        plain = dict(cfg)
    assert isinstance(plain, dict)
    for key in ("paths", "ckpt_path", "sweep_resume", "hydra", *NOT_TRAINING):
        plain.pop(key, None)
    text = json.dumps(plain, sort_keys=True, default=str)
    if run_dir is not None:
        text = text.replace(str(Path(run_dir).resolve()), "<run_dir>").replace(
            str(run_dir), "<run_dir>"
        )
    return text


def fingerprint(cfg: DictConfig | dict[str, Any], run_dir: str | Path | None = None) -> str:
    """SHA-256 of the fingerprinted config (see ``_fingerprinted_text``)."""
    return hashlib.sha256(_fingerprinted_text(cfg, run_dir).encode()).hexdigest()


def flat_config(
    cfg: DictConfig | dict[str, Any], run_dir: str | Path | None = None
) -> dict[str, Any]:
    """The fingerprinted config as ``{"optim.lr": 0.003, ...}`` (same exclusions and
    placeholder)."""
    text = _fingerprinted_text(cfg, run_dir)
    out: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict) and node:
            for k, v in node.items():
                walk(v, f"{prefix}.{k}" if prefix else str(k))
        else:
            out[prefix] = node

    walk(json.loads(text), "")
    return out


def config_changes(old: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(keys whose value changed, keys added or removed) between two flat configs.

    A key that is a leaf on one side and a node on the other (``model.position.scaling: null`` ->
    ``{name: yarn, factor: 4}``, or back) changed its value: the leaf and the node's keys count as
    changed, not as added or removed. Only a key with no counterpart at any depth (a new default
    such as ``num_workers: 0``) is added or removed."""
    changed = {k for k in old.keys() & new.keys() if old[k] != new[k]}
    added_removed = old.keys() ^ new.keys()
    for key in added_removed:
        if any(
            other.startswith(f"{key}.") or key.startswith(f"{other}.")
            for other in (new if key in old else old)
        ):
            changed.add(key)
    return sorted(changed), sorted(added_removed - changed)


def run_dir_of(cfg: DictConfig) -> Path:
    """The job's directory: ``paths.output_dir`` of the job's own config (the directory the run
    writes its metrics.json and checkpoints to, ``src.training.runner.output_dir``), else Hydra's
    runtime output dir. The config comes first: Hydra's runtime is a process-wide singleton that
    still names the previous job's directory when jobs run in one process."""
    d = OmegaConf.select(cfg, "paths.output_dir", default=None, throw_on_resolution_failure=False)
    if d is not None:
        return Path(str(d))
    try:
        return Path(HydraConfig.get().runtime.output_dir)
    except ValueError:  # HydraConfig not set: not under Hydra
        raise ConfigError(
            "sweep_resume needs the job's directory: run under Hydra or set paths.output_dir"
        ) from None


def archive_attempt(run_dir: Path) -> Path | None:
    """Move a previous attempt's outputs to ``attempts/<n>/`` (None when there were none)."""
    items = (
        [p for p in run_dir.iterdir() if p.name not in KEEP and not p.name.endswith(".log")]
        if run_dir.is_dir()
        else []
    )
    if not items:
        return None
    root = run_dir / ATTEMPTS
    n = (
        1 + max((int(p.name) for p in root.iterdir() if p.name.isdigit()), default=0)
        if root.is_dir()
        else 1
    )
    dest = root / str(n)
    dest.mkdir(parents=True)
    for p in items:
        shutil.move(str(p), str(dest / p.name))
    return dest


def _is_rank_zero() -> bool:
    return all(os.environ.get(k, "0") == "0" for k in ("RANK", "LOCAL_RANK", "SLURM_PROCID"))


def skip_completed(cfg: DictConfig) -> Completed | None:
    """At the start of a job: the stored result if it already completed with this config,
    else None after preparing the directory for a fresh attempt (see the module docstring)."""
    node = OmegaConf.select(cfg, "sweep_resume", default=None)
    if node and not isinstance(node.get("skip_completed", False), bool):
        raise ConfigError(
            f"sweep_resume.skip_completed={node.get('skip_completed')!r} is invalid: true or false"
        )
    if not node or not node.get("skip_completed", False) or not _is_rank_zero():
        # stamp anyway: a re-run with skip_completed then knows this job
        if _is_rank_zero() and _in_multirun():
            run_dir = run_dir_of(cfg)
            stamp = read_json(run_dir / STAMP) or {}
            fp = fingerprint(cfg, run_dir)
            _write_stamp(
                run_dir, fp, flat_config(cfg, run_dir), stamp, stamp.get("fingerprint") == fp
            )
        return None
    check_keys(node, ("skip_completed", "incomplete"), where="sweep_resume", prefix="sweep_resume.")
    mode = str(node.get("incomplete", "restart"))
    if mode not in INCOMPLETE_MODES:
        raise ConfigError(
            f"sweep_resume.incomplete='{mode}' is not known; use one of "
            f"{', '.join(INCOMPLETE_MODES)} (restart: run an unfinished job again; last: continue "
            "it from its checkpoints/last.ckpt)"
        )
    run_dir = run_dir_of(cfg)
    fp = fingerprint(cfg, run_dir)
    flat = flat_config(cfg, run_dir)
    metrics = read_json(run_dir / METRICS)
    stamp = read_json(run_dir / STAMP) or {}
    same = stamp.get("fingerprint") == fp
    if not same and isinstance(stamp.get("config"), dict):
        changed, added_removed = config_changes(stamp["config"], flat)
        if not changed:
            same = True
            log.info(
                "sweep_resume: %s: config keys added/removed since the job ran (values unchanged): "
                "%s",
                run_dir,
                ", ".join(added_removed[:10]) + (" …" if len(added_removed) > 10 else ""),
            )
        else:
            log.info(
                "sweep_resume: %s: config values changed since the job ran: %s",
                run_dir,
                ", ".join(
                    f"{k}: {stamp['config'].get(k, '<absent>')!r} -> {flat.get(k, '<absent>')!r}"
                    for k in changed[:10]
                ),
            )
    if metrics and metrics.get("status") == "completed" and same:
        monitor = str(cfg.get("optimized_metric") or "val/loss")
        value = metrics.get(f"{monitor}_best", metrics.get(monitor))
        log.info("sweep_resume: %s already completed (%s=%s); skipping", run_dir, monitor, value)
        return Completed(run_dir=run_dir, value=value, metrics=metrics)
    if (
        metrics
        and metrics.get("status") == "failed"
        and same
        and is_divergence(metrics.get("error"))
    ):
        # a divergence is a result (the report counts it): re-running only the failures would bias
        # the diverged share
        log.info("sweep_resume: %s diverged earlier with this config; not repeating it", run_dir)
        raise NonFiniteLossError(
            f"{metrics.get('error')} [stored: this job diverged in an earlier run of the sweep "
            "with the same config, and sweep_resume does not re-roll a divergence (that would "
            f"bias the diverged share down); its files stay in {run_dir}. To run it again anyway, "
            "delete its metrics.json]"
        )
    previous = (
        "completed with a different config"
        if metrics and metrics.get("status") == "completed"
        else (
            f"{metrics.get('status')}: {metrics.get('error')}"
            if metrics
            else "interrupted (no metrics.json)"
        )
    )
    last = run_dir / "checkpoints" / "last.ckpt"
    if mode == "last" and same and last.is_file() and not cfg.get("ckpt_path"):
        log.info("sweep_resume: %s was %s; continuing from %s", run_dir, previous, last)
        with open_dict(cfg):
            cfg.ckpt_path = str(last)
        (run_dir / METRICS).unlink(missing_ok=True)
    else:
        moved = archive_attempt(run_dir)
        if moved is not None:
            log.info(
                "sweep_resume: %s was %s; its files moved to %s, running it again",
                run_dir,
                previous,
                moved,
            )
    _write_stamp(run_dir, fp, flat, stamp, same)
    return None


def _write_stamp(
    run_dir: Path, fp: str, flat: dict[str, Any], stamp: dict[str, Any], same: bool
) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    attempts = int(stamp.get("attempt", 0)) + 1 if same else 1
    now = time.time()
    # when the job first ran here: the report's order
    first = stamp.get("first_started", stamp.get("started", now))
    atomic_write(
        run_dir / STAMP,
        json.dumps(
            {
                "fingerprint": fp,
                "attempt": attempts,
                "started": now,
                "first_started": first,
                "config": flat,
            },
            default=str,
        )
        + "\n",
    )


def _in_multirun() -> bool:
    """Whether this job is one of a Hydra multirun (its stamp lets the sweep be re-run with
    skip_completed)."""
    try:
        return HydraConfig.get().mode == RunMode.MULTIRUN
    except ValueError:  # not under Hydra
        return False
