"""Train a model: ``python -m src.train [experiment=<name>] [overrides]`` (conf/train.yaml).

A thin Hydra entry point; the work is in ``src.training.runner.train``. Multirun
(``-m``) runs one job per sweep point, each in its own directory with its own metrics.json.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from omegaconf import DictConfig

from src.cli import clean_errors
from src.config.output_dir import check_run_dir_unused
from src.config.typos import check_command_line
from src.config.yaml_limits import check_command_line_yaml
from src.echo import echo
from src.jsonfile import METRICS, read_json
from src.studies import (
    skip_completed,
)  # also registers ${sweep_subdir:...} for deterministic sweep job dirs
from src.studies.lock import hold_run_dir
from src.studies.plugins import check_plugins
from src.studies.slots import pin_job
from src.training.console import final_figures, format_outputs, run_outputs
from src.training.distributed import install_ddp_launcher_fix
from src.training.runner import train


@hydra.main(config_path="../conf", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    hc = HydraConfig.get()
    # hydra/launcher=joblib: this job's share of CPUs/GPUs, before anything touches CUDA
    # (src/studies/slots.py)
    pin_job(
        hc,
        accelerator=str(cfg.trainer.get("accelerator", "auto")),
        cpu_threads=cfg.get("cpu_threads"),
    )
    # DDP ranks > 0 reuse this job's run directory (see src/training/distributed.py)
    install_ddp_launcher_fix()
    # our errors print as one message, others keep their traceback (src/cli.py);
    # one live job per run directory (src/studies/lock.py)
    with clean_errors(), hold_run_dir(hc.runtime.output_dir):
        done = skip_completed(
            cfg
        )  # sweep_resume.skip_completed: a re-run sweep skips finished jobs (src/studies/resume.py)
        if (
            done is None
        ):  # a new run never shares a directory with an old one (src/config/output_dir.py)
            check_run_dir_unused(hc.runtime.output_dir, cfg.get("ckpt_path"))
        value = done.value if done is not None else train(cfg)
    say_where_results_went(hc.runtime.output_dir, skipped=done is not None)
    return value


@rank_zero_only
def say_where_results_went(run_dir: str, skipped: bool = False) -> None:
    """The last lines of a run (console and train.log): its final losses and tokens/s, then its
    directory, metrics.json, checkpoints and each logger's files."""
    metrics = read_json(Path(run_dir) / METRICS) or {}
    head = (
        "skipped by sweep_resume (done earlier with this config)"
        if skipped
        else f"{metrics.get('status', 'finished')}"
    )
    echo(
        f"\n{final_figures(metrics)}\nrun {head}; "
        f"outputs:\n{format_outputs(run_outputs(run_dir, metrics))}"
    )


if __name__ == "__main__":
    check_command_line_yaml(
        sys.argv[1:]
    )  # first: a YAML alias bomb in a named config file is one line, not a hang
    check_command_line(
        "train", sys.argv[1:]
    )  # a misspelt key or option: the closest names (src/config/typos.py)
    check_plugins(
        sys.argv[1:]
    )  # hydra/launcher=submitit_slurm etc. without the plugin: name the extra
    main()
