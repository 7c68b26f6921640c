"""Every option of every config group of conf/train.yaml composes; struct mode catches typos;
callbacks, loggers and CPU trainers instantiate."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import ConfigCompositionException
from hydra.utils import instantiate
from omegaconf import OmegaConf

from src.config.trainer_checks import lightning_trainer_node
from tests.training.conftest import CONF, compose_train

TOP_GROUPS = [
    "model",
    "data",
    "tokenizer",
    "objective",
    "trainer",
    "optim",
    "scheduler",
    "logger",
    "callbacks",
    "paths",
    "hydra",
]
# groups other parts add to train.yaml
TOP_GROUPS += [g for g in ("reliability",) if (CONF / g).is_dir()]
MODEL_SUBGROUPS = [
    "model/position",
    "model/norm",
    "model/ffn",
    "model/mask",
]  # with the default model (gpt2_small)


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def zipped(groups: list[str]) -> list[list[str]]:
    """Override lists that together use every option of every group at least once (composing
    each option alone would cost one Hydra compose per option)."""
    n = max(len(options(g)) for g in groups)
    return [[f"{g}={options(g)[i % len(options(g))]}" for g in groups] for i in range(n)]


CASES = (
    zipped(TOP_GROUPS)
    + zipped(MODEL_SUBGROUPS)
    + [[f"experiment={e}"] for e in options("experiment")]
)


def test_every_group_has_options() -> None:
    for g in TOP_GROUPS + MODEL_SUBGROUPS + ["experiment", "hydra/launcher"]:
        assert options(g), f"conf/{g} is empty"


@pytest.mark.parametrize("overrides", CASES, ids=[" ".join(c) for c in CASES])
def test_every_option_composes(overrides: list[str], tmp_path: Path) -> None:
    cfg = compose_train(overrides, tmp_path)
    assert (
        cfg.model.name
        and cfg.objective.name
        and cfg.trainer._target_ == "lightning.pytorch.Trainer"
    )
    for key in ("trainer", "optim", "scheduler", "objective", "tokenizer", "callbacks", "logger"):
        OmegaConf.to_container(cfg[key], resolve=True)


def test_struct_mode_rejects_typos(tmp_path: Path) -> None:
    with pytest.raises(ConfigCompositionException, match="optim.lrr"):
        compose_train(["optim.lrr=1e-3"], tmp_path)
    with pytest.raises(ConfigCompositionException, match="Could not find 'objective/causal'"):
        compose_train(["objective=causal"], tmp_path)


def test_slurm_launcher_config(tmp_path: Path) -> None:
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    compose_train(["hydra/launcher=submitit_slurm", "hydra.launcher.partition=gpu"], tmp_path)
    launcher = HydraConfig.get().launcher
    assert launcher._target_.endswith("submitit_launcher.SlurmLauncher")
    assert (
        launcher.partition == "gpu"
        and launcher.tasks_per_node == 1
        and "submitit_folder" in launcher
    )


@pytest.mark.parametrize("option", options("callbacks"))
def test_callbacks_instantiate(option: str, tmp_path: Path) -> None:
    cfg = compose_train([f"callbacks={option}"], tmp_path)
    for name, node in (cfg.callbacks or {}).items():
        assert instantiate(node) is not None, name


@pytest.mark.parametrize("option", options("logger"))
def test_loggers_instantiate(option: str, tmp_path: Path) -> None:
    needs = {"tensorboard": "tensorboard", "wandb": "wandb"}.get(option)
    if (
        needs
        and importlib.util.find_spec(needs) is None
        and not (needs == "tensorboard" and importlib.util.find_spec("tensorboardX"))
    ):
        pytest.skip(f"{needs} is not installed (optional logger)")
    cfg = compose_train([f"logger={option}"], tmp_path)
    for name, node in (cfg.logger or {}).items():
        assert instantiate(node) is not None, name


@pytest.mark.parametrize("option", ["default", "cpu", "ddp_cpu"])
def test_cpu_trainers_instantiate(option: str, tmp_path: Path) -> None:
    cfg = compose_train([f"trainer={option}", "trainer.accelerator=cpu"], tmp_path)
    node = lightning_trainer_node(OmegaConf.to_container(cfg.trainer, resolve=True))
    trainer = instantiate(node, logger=False, enable_checkpointing=False)
    assert trainer.max_steps == cfg.trainer.max_steps


def test_fsdp_strategy_builds() -> None:
    from lightning.pytorch.strategies import FSDPStrategy

    from src.training.strategies import fsdp_strategy

    assert isinstance(fsdp_strategy(activation_checkpointing=True), FSDPStrategy)


def teardown_module() -> None:
    GlobalHydra.instance().clear()
