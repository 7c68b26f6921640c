"""Train a model: ``python -m src.train [experiment=<name>] [overrides]`` (conf/train.yaml).

A thin Hydra entry point; the work is in ``src.training.runner.train``. Multirun (``-m``) runs one
job per sweep point, each in its own directory with its own metrics.json. Only Hydra and the
preflight checks load before the command line is checked; the training stack loads inside
``main``.
"""

from __future__ import annotations

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

# the resolvers of conf/: Hydra and its callbacks resolve them before main runs
import src.runs  # noqa: F401  (${sweep_subdir:...})
import src.training  # noqa: F401  (${device_precision:...}, ${grad_accum:...}; loads no torch)
from src.cli import hydra_entry


@hydra_entry("train")
def main(cfg: DictConfig) -> float | None:
    from src.runs.lock import hold_run_dir
    from src.runs.output_dir import check_run_dir_unused
    from src.runs.resume import skip_completed
    from src.runs.slots import pin_job
    from src.training.console import say_where_results_went
    from src.training.distributed import install_ddp_launcher_fix
    from src.training.runner import train

    hc = HydraConfig.get()
    # hydra/launcher=joblib: this job's share of CPUs/GPUs, before anything touches CUDA
    pin_job(
        hc,
        accelerator=str(cfg.trainer.get("accelerator", "auto")),
        cpu_threads=cfg.get("cpu_threads"),
    )
    install_ddp_launcher_fix()  # DDP ranks > 0 reuse this job's run directory
    with hold_run_dir(hc.runtime.output_dir):  # one live job per run directory
        # sweep_resume.skip_completed: a re-run sweep skips finished jobs
        done = skip_completed(cfg)
        if done is None:  # a new run never shares a directory with an old one
            check_run_dir_unused(hc.runtime.output_dir, cfg.get("ckpt_path"))
        value = done.value if done is not None else train(cfg)
    say_where_results_went(hc.runtime.output_dir, skipped=done is not None)
    return value


if __name__ == "__main__":
    main()
