"""Job folders named by the swept overrides, and the sweep directory printed (issue 26, item 5)."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from src.errors import ConfigError
from src.runs.sweep_dirs import EXCLUDE_KEY, SweepDirs, fixed_keys


def test_fixed_keys_are_the_overrides_that_do_not_sweep() -> None:
    task = [
        "model/position=learned,rope",
        "trainer.max_steps=50",
        "+x=1",
        "seed=range(1,3)",
        "experiment=quickstart",
    ]
    assert fixed_keys(task) == ["experiment", "trainer.max_steps", "x"]
    assert fixed_keys(["seed=1,2"]) == []


def _master(task: list[str], exclude: list[str], sweep_dir: Path) -> object:
    cfg = OmegaConf.create(
        {
            "hydra": {
                "overrides": {"task": task, "hydra": ["hydra.mode=MULTIRUN"]},
                "sweep": {"dir": str(sweep_dir)},
                "job": {"config": {"override_dirname": {"exclude_keys": exclude}}},
            }
        }
    )
    OmegaConf.set_readonly(cfg, True)  # as Hydra hands it over
    return cfg


def test_swept_naming_adds_the_fixed_keys_to_hydras_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _master(
        ["model.norm_placement=pre,post", "trainer.max_steps=5", "+cb.dir=${paths.output_dir}"],
        ["seed"],
        tmp_path,
    )
    SweepDirs().on_multirun_start(cfg)
    # what every job's config is composed with (ConfigLoader.load_sweep_config): the user's exclusions kept
    assert list(cfg.hydra.overrides.hydra) == [
        "hydra.mode=MULTIRUN",
        f"{EXCLUDE_KEY}=['seed','cb.dir','trainer.max_steps']",
    ]
    assert f"sweep directory: {tmp_path.resolve()}" in capsys.readouterr().out
    (tmp_path / "model.norm_placement=pre").mkdir()
    (tmp_path / "model.norm_placement=pre" / "metrics.json").write_text("{}")
    SweepDirs().on_multirun_end(cfg)
    out = capsys.readouterr().out
    assert f"1 job folder(s) with metrics.json in {tmp_path.resolve()}" in out
    # the last line says where to look
    assert out.rstrip().endswith(f"python -m src.report {tmp_path.resolve()}")


def test_name_by_all_leaves_the_overrides_alone(tmp_path: Path) -> None:
    cfg = _master(
        ["model.norm_placement=pre,post", "trainer.max_steps=5"], ["experiment"], tmp_path
    )
    SweepDirs(name_by="all").on_multirun_start(cfg)
    assert list(cfg.hydra.overrides.hydra) == ["hydra.mode=MULTIRUN"]
    with pytest.raises(ConfigError, match="name_by='some'"):
        SweepDirs(name_by="some")  # type: ignore[arg-type]


def test_the_studies_keep_naming_jobs_by_every_override() -> None:
    conf = Path(__file__).resolve().parents[2] / "conf"
    assert OmegaConf.load(conf / "hydra" / "default.yaml").callbacks.sweep_dirs.name_by == "swept"
    assert (
        OmegaConf.load(conf / "experiment" / "study_common.yaml").hydra.callbacks.sweep_dirs.name_by
        == "all"
    )
