"""Multi-GPU by default: ``python -m src.train model=gpt2_small`` composes a trainer that
Lightning's own device resolution turns into DDP over every GPU in bf16-mixed, one device on
one GPU, and one float32 CPU process here. (The 2-process CPU DDP run itself is
tests/training/test_multirun.py::test_ddp_two_cpu_processes_in_a_multirun.)"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate
from lightning.pytorch.accelerators import CPUAccelerator, CUDAAccelerator
from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy
from omegaconf import OmegaConf

import src.training  # noqa: F401  (registers ${device_precision:...})
from src.config.trainer_checks import lightning_trainer_node


# -> lightning Trainer
def default_trainer(conf_dir: Path, tmp_path: Path, overrides: tuple[str, ...] = ()):
    """The Trainer ``python -m src.train model=gpt2_small`` builds, from the composed config."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = compose(
            "train",
            overrides=[
                "model=gpt2_small",
                f"paths.output_dir={tmp_path}",
                f"paths.root_dir={tmp_path}",
                *overrides,
            ],
        )
    GlobalHydra.instance().clear()
    return instantiate(
        lightning_trainer_node(OmegaConf.to_container(cfg.trainer, resolve=True)),
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )


@contextmanager
def gpus(n: int) -> Iterator[None]:
    """A machine with ``n`` bf16-capable CUDA GPUs, as Lightning and torch count them."""
    with (
        mock.patch.object(torch.cuda, "device_count", return_value=n),
        mock.patch.object(torch.cuda, "is_available", return_value=n > 0),
        mock.patch.object(torch.cuda, "is_bf16_supported", return_value=True),
        mock.patch("lightning.fabric.accelerators.cuda.num_cuda_devices", return_value=n),
        mock.patch("lightning.pytorch.accelerators.cuda.num_cuda_devices", return_value=n),
    ):
        yield


def test_on_this_cpu_one_float32_process(conf_dir: Path, tmp_path: Path) -> None:
    trainer = default_trainer(conf_dir, tmp_path)
    assert isinstance(trainer.accelerator, CPUAccelerator) and isinstance(
        trainer.strategy, SingleDeviceStrategy
    )
    assert trainer.num_devices == 1 and trainer.precision == "32-true"


@pytest.mark.parametrize("n", [8, 2])
def test_on_n_gpus_ddp_over_all_of_them_in_bf16(conf_dir: Path, tmp_path: Path, n: int) -> None:
    with gpus(n):
        trainer = default_trainer(conf_dir, tmp_path)
    assert isinstance(trainer.accelerator, CUDAAccelerator) and isinstance(
        trainer.strategy, DDPStrategy
    )
    assert trainer.num_devices == n and trainer.precision == "bf16-mixed"
    assert [d.index for d in trainer.strategy.parallel_devices] == list(range(n))


def test_on_one_gpu_a_single_device(conf_dir: Path, tmp_path: Path) -> None:
    with gpus(1):
        trainer = default_trainer(conf_dir, tmp_path)
    assert isinstance(trainer.strategy, SingleDeviceStrategy) and trainer.num_devices == 1
    assert trainer.precision == "bf16-mixed" and trainer.strategy.root_device == torch.device(
        "cuda", 0
    )


def test_explicit_choices_still_win(conf_dir: Path, tmp_path: Path) -> None:
    with gpus(8):
        assert (
            default_trainer(conf_dir, tmp_path, ("trainer.accelerator=cpu",)).precision == "32-true"
        )
        t = default_trainer(conf_dir, tmp_path, ("trainer.devices=2", "trainer.precision=32"))
    assert t.num_devices == 2 and t.precision == "32-true" and isinstance(t.strategy, DDPStrategy)
