"""One training run: set up, fit, test, and record ``metrics.json`` whatever happens.

``train(cfg)`` is what ``python -m src.train`` calls for each run (or multirun job). It returns
the best value of ``optimized_metric`` (``val/loss``) so sweepers (Optuna, …) can minimise it.

On an exception ``metrics.json`` gets ``status: failed`` and the error, then the exception is
re-raised. Hydra's launchers catch it per job (``hydra.core.utils.run_job`` stores it in the
job's ``JobReturn``), so in a multirun the remaining jobs still run, and the sweep exits with
the first failure once all jobs are done; every job's ``metrics.json`` says how it ended.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from omegaconf import DictConfig, OmegaConf

from src.callbacks.preemption import catch_sigterm, preemption_error, stop_if_preempted
from src.callbacks.summary import ModelSummary, RunSummary
from src.config.inherited import hydra_inherited
from src.config.spec import RunSpec
from src.config.validate import validate_run_config
from src.echo import mirror_lightning_to_log_file
from src.errors import Preempted
from src.inspection.memory import check_fits
from src.jsonfile import METRICS, write_json
from src.lightning_compat import logged_as_last_fit_step
from src.provenance import provenance
from src.training.console import quiet_third_party
from src.training.distributed import launcher_scope
from src.training.loggers import close_loggers
from src.training.parallel import check_tensor_parallel
from src.training.setup import Run, build_run, build_trainer

log = logging.getLogger(__name__)


def output_dir(cfg: DictConfig) -> Path:
    """The run directory: ``paths.output_dir`` (Hydra's job directory), else
    ``trainer.default_root_dir``."""
    d = OmegaConf.select(cfg, "paths.output_dir", default=None)
    if d is None:
        d = OmegaConf.select(cfg, "trainer.default_root_dir", default=None) or os.getcwd()
    return Path(str(d))


def configure_backends(spec: RunSpec) -> None:
    """Seed (python, numpy, torch, dataloader workers), CPU threads and float32 matmul precision."""
    plain = spec.plain
    pl.seed_everything(int(plain["seed"]), workers=True, verbose=False)
    threads = plain.get("cpu_threads")
    # small models on a few shared cores: OpenMP threads spinning against each other cost ~10x
    if threads:
        torch.set_num_threads(int(threads))
    if torch.cuda.is_available():
        allow = bool(plain.get("tf32", True))
        torch.backends.cuda.matmul.allow_tf32 = allow
        torch.backends.cudnn.allow_tf32 = allow


def model_summary(spec: RunSpec) -> list[pl.Callback]:
    """Our model summary (own FLOPs count) in place of Lightning's, when the trainer shows one."""
    if not spec.section("trainer").get("enable_model_summary", True):
        return []
    block = spec.plain.get("block_size")
    return [ModelSummary(seq_len=int(block) if block else None)]


def train(cfg: DictConfig) -> float | None:
    """Fit (and test) one configuration; write metrics.json; return the best
    ``optimized_metric``."""
    t0 = time.perf_counter()
    # read now, not at the end: a commit or an edit during a long run is not this run's code
    origin = provenance()
    run_dir = output_dir(cfg)
    monitor = str(cfg.get("optimized_metric") or "val/loss")
    summary = RunSummary(monitor=monitor)
    run: Run | None = None
    trainer: pl.Trainer | None = None
    # a multirun's next DDP job in this process launches its own ranks again; a SIGTERM between
    # Lightning's phases is kept for the checks after each
    with launcher_scope(), catch_sigterm():
        try:
            # Lightning's litlogger tip and its own _pytree deprecation (src/training/console.py)
            quiet_third_party()
            # Lightning's info lines into train.log too (src/echo.py)
            mirror_lightning_to_log_file()
            # the one validation; nothing reads cfg after it
            spec = validate_run_config(cfg, inherited=hydra_inherited())
            check_fits(spec)  # trainer.device_memory_gb: refused before any process starts
            configure_backends(spec)
            run = build_run(spec)
            # trainer.tensor_parallel: the model's plan, refused before any process starts
            tp = (spec.plain.get("trainer") or {}).get("tensor_parallel", 1)
            check_tensor_parallel(run.task.model, tp)
            trainer = build_trainer(run.spec, extra_callbacks=[summary, *model_summary(spec)])
            # a cooldown branch (scheduler.decay_from) resumes its stable-phase checkpoint
            start = spec.plain.get("ckpt_path") or spec.schedule.branch_checkpoint()
            trainer.fit(run.task, datamodule=run.datamodule, ckpt_path=start)
            stop_if_preempted(trainer)
            validate_final_weights(trainer, run, summary)
            stop_if_preempted(trainer)
            if spec.plain.get("test", True):
                summary.scored = scored_weights(trainer, summary)
                log.info("testing the %s weights (step %d)", *summary.scored[:2])
                trainer.test(
                    run.task, datamodule=run.datamodule, ckpt_path=summary.scored[2], verbose=False
                )
                # a signal during the test's last batch or its epoch-end work
                stop_if_preempted(trainer)
        except BaseException as e:
            # SIGTERM / SLURM's signal: Preempted, naming the checkpoint written
            stopped = preemption_error(e, trainer)
            _record(run_dir, "failed", stopped or e, run, trainer, summary, t0, origin)
            close_loggers(trainer, failed=True)
            if stopped is not None:
                raise stopped from None
            raise
    _record(run_dir, "completed", None, run, trainer, summary, t0, origin)
    close_loggers(trainer)
    best = summary.best
    if best is not None:
        return best[1]
    value = summary.final.get(monitor)
    return value


def validate_final_weights(trainer: pl.Trainer, run: Run, summary: RunSummary) -> None:
    """Validate the final weights when the last validation of the fit was at an earlier step
    (``trainer.max_steps`` not a multiple of ``val_check_interval``), so the final weights take part
    in the choice of the best ones and the report can say which it scored."""
    last = summary.history[-1][0] if summary.history else None
    if (
        trainer.fast_dev_run
        or not trainer.global_step
        or last == trainer.global_step
        or not trainer.limit_val_batches
        or trainer.interrupted
        or not summary.history
    ):  # no validation at all: the run asked for none
        return
    # its val/* rows at the fit's convention (global_step - 1)
    with logged_as_last_fit_step(trainer):
        trainer.validate(run.task, datamodule=run.datamodule, verbose=False)


def scored_weights(trainer: pl.Trainer, summary: RunSummary) -> tuple[str, int, str | None]:
    """(which weights the test scores: "best" | "final", their step, the checkpoint to load or
    None): the best checkpoint by validation, unless the final weights are the best (or there is
    none)."""
    ck = trainer.checkpoint_callback
    best_path = ck.best_model_path if isinstance(ck, ModelCheckpoint) else ""
    best = summary.best
    if not best_path or best is None or best[0] == trainer.global_step:
        return "final", int(trainer.global_step), None
    return "best", int(best[0]), best_path


@rank_zero_only
def _record(
    run_dir: Path,
    status: str,
    error: BaseException | None,
    run: Run | None,
    trainer: pl.Trainer | None,
    summary: RunSummary,
    t0: float,
    origin: dict[str, Any],
) -> None:
    if error is None:
        message = None
    elif isinstance(error, Preempted):
        message = f"Preempted: {error}"
    elif isinstance(error, SystemExit):  # Lightning exits this way after Ctrl+C
        message = f"interrupted (SystemExit {error.code})"
    else:
        message = f"{type(error).__name__}: {error}"
    record: dict[str, Any] = {"status": status, "error": message}
    task = run.task if run is not None else None
    record["params"] = task.model.num_parameters() if task is not None else None
    tokens = task.tokens_seen if task is not None else 0
    record["tokens_seen"] = tokens
    record["wall_time_s"] = round(time.perf_counter() - t0, 3)
    # the one definition (src/callbacks/summary.py)
    record["throughput_tokens_per_s"] = summary.tokens_per_s
    best = summary.best
    record["best_step"] = best[0] if best is not None else None
    record["global_step"] = int(trainer.global_step) if trainer is not None else 0
    # the weights test/* scored: "best" (by validation) or "final", and their step
    if summary.scored is not None:
        record["scored_weights"], record["scored_step"] = summary.scored[0], summary.scored[1]
    record.update(sorted(summary.final.items()))
    # run-level values of a callback (probes' induction step)
    for cb in trainer.callbacks if trainer is not None else []:
        run_record = getattr(cb, "run_record", None)
        if callable(run_record):
            record.update(run_record())
    if best is not None:
        record[f"{summary.monitor}_best"] = best[1]
    if trainer is not None and isinstance(trainer.checkpoint_callback, ModelCheckpoint):
        ck = trainer.checkpoint_callback
        record["best_ckpt"] = ck.best_model_path or None
        record["last_ckpt"] = ck.last_model_path or None
    record["provenance"] = (
        origin  # the code (as the run started), library versions and device behind these numbers
    )
    try:
        write_json(run_dir / METRICS, record)  # atomic; NaN -> null (schema: docs/CONTRACTS.md)
    except OSError as e:  # never hide the original error behind a failed write
        log.error("could not write %s/metrics.json: %s", run_dir, e)
