"""Train a model: ``python -m src.train [experiment=<name>] [overrides]`` (conf/train.yaml).

A thin Hydra entry point; the work is in ``src.training.runner.train``. Multirun
(``-m``) runs one job per sweep point, each in its own directory with its own metrics.json.
"""
from __future__ import annotations

import hydra
from omegaconf import DictConfig

from src.sweeps import skip_completed  # also registers ${sweep_subdir:...} for deterministic sweep job dirs
from src.training.distributed import install_ddp_launcher_fix
from src.training.runner import train


@hydra.main(config_path="../conf", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    install_ddp_launcher_fix()  # DDP ranks > 0 reuse this job's run directory (see src/training/distributed.py)
    done = skip_completed(cfg)  # sweep_resume.skip_completed: a re-run sweep skips finished jobs (src/sweeps/resume.py)
    if done is not None:
        return done.value
    return train(cfg)


if __name__ == "__main__":
    main()
