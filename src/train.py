"""Train a model: ``python -m src.train [experiment=<name>] [overrides]`` (conf/train.yaml).

A thin Hydra entry point; the work is in ``src.training.runner.train``. Multirun
(``-m``) runs one job per sweep point, each in its own directory with its own metrics.json.
"""
from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from src.sweeps import skip_completed  # also registers ${sweep_subdir:...} for deterministic sweep job dirs
from src.sweeps.lock import hold_run_dir
from src.sweeps.plugins import check_plugins
from src.sweeps.slots import pin_job
from src.training.distributed import install_ddp_launcher_fix
from src.training.runner import train


@hydra.main(config_path="../conf", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    hc = HydraConfig.get()
    # hydra/launcher=joblib: this job's share of CPUs/GPUs, before anything touches CUDA (src/sweeps/slots.py)
    pin_job(hc, accelerator=str(cfg.trainer.get("accelerator", "auto")), cpu_threads=cfg.get("cpu_threads"))
    install_ddp_launcher_fix()  # DDP ranks > 0 reuse this job's run directory (see src/training/distributed.py)
    with hold_run_dir(hc.runtime.output_dir):  # one live job per run directory (src/sweeps/lock.py)
        done = skip_completed(cfg)  # sweep_resume.skip_completed: a re-run sweep skips finished jobs (src/sweeps/resume.py)
        if done is not None:
            return done.value
        return train(cfg)


if __name__ == "__main__":
    check_plugins(sys.argv[1:])  # hydra/launcher=submitit_slurm etc. without the plugin: name the extra
    main()
