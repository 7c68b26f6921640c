"""Issue 21 item 13: a saved run config reused with ``--config-path <run>/.hydra`` is input like any other:
a callback's or logger's ``_target_`` is checked to be a Lightning Callback / Logger (and to build no argument
from a nested ``_target_``) by ``validate_run_config``, before anything is instantiated."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

from src.config.validate import validate_run_config
from src.errors import ConfigError
from tests.run_fixtures import REPO, subprocess_env


def _with(cfg: DictConfig, group: str, name: str, node: dict) -> DictConfig:
    OmegaConf.set_struct(cfg, False)
    cfg[group][name] = node
    return cfg


def test_a_saved_config_with_a_function_as_callback_is_refused_before_it_runs(
    tmp_path: Path, compose: Callable[..., DictConfig], tiny: tuple[str, ...]
) -> None:
    victim = tmp_path / "victim"
    (victim / "keep.txt").parent.mkdir()
    (victim / "keep.txt").write_text("still here")
    cfg = _with(
        compose(*tiny, output_dir=tmp_path / "old"),
        "callbacks",
        "evil",
        {"_target_": "shutil.rmtree", "path": str(victim)},
    )
    saved = tmp_path / "old" / ".hydra"
    saved.mkdir(parents=True)
    (saved / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "src.train",
            "--config-path",
            str(saved),
            "--config-name",
            "config",
            f"hydra.run.dir={tmp_path / 'new'}",
            f"paths.output_dir={tmp_path / 'new'}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=subprocess_env(HYDRA_FULL_ERROR="0"),
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "callbacks.evil._target_='shutil.rmtree'" in proc.stderr and "Callback" in proc.stderr
    assert "~callbacks.evil" in proc.stderr and "Traceback" not in proc.stderr
    assert (victim / "keep.txt").read_text() == "still here"


@pytest.mark.parametrize(
    ("group", "node", "key"),
    [
        (
            "callbacks",
            {"_target_": "collections.OrderedDict"},
            "callbacks.x._target_='collections.OrderedDict'",
        ),
        (
            "logger",
            {"_target_": "lightning.pytorch.callbacks.ModelCheckpoint"},
            "logger.x._target_=",
        ),
        (
            "callbacks",
            {
                "_target_": "lightning.pytorch.callbacks.ModelCheckpoint",
                "dirpath": {"_target_": "os.getcwd"},
            },
            "callbacks.x.dirpath._target_='os.getcwd'",
        ),
    ],
)
def test_a_target_of_the_wrong_kind_is_refused(
    compose: Callable[..., DictConfig], tiny: tuple[str, ...], group: str, node: dict, key: str
) -> None:
    with pytest.raises(ConfigError) as info:
        validate_run_config(_with(compose(*tiny), group, "x", node))
    assert key in str(info.value)


def test_the_configured_callbacks_and_loggers_pass(
    compose: Callable[..., DictConfig], tiny: tuple[str, ...]
) -> None:
    validate_run_config(compose(*tiny, "logger=csv"))
    # a factory of ours (src.training.loggers.mlflow_logger)
    validate_run_config(compose(*tiny, "logger=mlflow"))
