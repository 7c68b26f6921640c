"""Experiments compose with any variant of the groups they configure: a value an experiment sets
for the variant it picks is left out when the command line picks a variant without that key;
the same key typed on the command line is still refused (src/config/inherited.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from src.config.inherited import drop_inherited, hydra_inherited, inherited_keys
from src.config.validate import validate_run_config
from src.errors import ConfigError
from tests.training.conftest import compose_train, train_in_process


def test_an_experiments_keys_are_read_from_its_files_less_the_typed_ones() -> None:
    keys = inherited_keys({"experiment": "quickstart"}, [])
    assert {"scheduler.warmup_steps", "optim.lr", "model.d_model", "seed"} <= keys
    assert "defaults" not in {k.split(".")[0] for k in keys}
    typed = inherited_keys({"experiment": "quickstart"}, ["scheduler.warmup_steps=3", "+seed=2"])
    assert "scheduler.warmup_steps" not in typed and "seed" not in typed
    # an experiment's own defaults list: study_norm inherits study_common's keys
    assert "paths.data_dir" in inherited_keys({"experiment": "study_norm"}, [])
    assert inherited_keys({}, []) == set()


def test_only_inherited_keys_the_variant_does_not_take_are_left_out() -> None:
    plain = {
        "scheduler": {"name": "none", "warmup_steps": 30},
        "optim": {"name": "adamw", "lr": 1e-3, "lrr": 2},
    }
    dropped = drop_inherited(plain, {"scheduler.warmup_steps", "optim.lr"})
    assert dropped == ["scheduler.warmup_steps"]
    assert plain == {
        "scheduler": {"name": "none"},
        "optim": {"name": "adamw", "lr": 1e-3, "lrr": 2},
    }


@pytest.mark.parametrize(
    "overrides",
    [
        ["experiment=quickstart", "optim=schedulefree", "scheduler=none"],
        ["experiment=synthetic_quickstart", "data=addition"],
        ["experiment=synthetic_quickstart", "model.family=encoder_decoder"],
        ["experiment=synthetic_quickstart", "data=reverse", "model/position=alibi"],
    ],
)
def test_an_experiment_composes_with_another_variant(overrides: list[str], tmp_path: Path) -> None:
    cfg = compose_train(overrides, tmp_path / "run")
    spec = validate_run_config(cfg, inherited=hydra_inherited())
    assert spec.plain["model"]["family"] in ("decoder_only", "encoder_decoder")


def test_the_same_key_typed_on_the_command_line_is_refused(tmp_path: Path) -> None:
    overrides = ["experiment=quickstart", "scheduler=none", "scheduler.warmup_steps=3"]
    cfg = compose_train(overrides, tmp_path / "run")
    with pytest.raises(
        ConfigError, match="scheduler.warmup_steps=3 is not a key of scheduler=none"
    ):
        validate_run_config(cfg, inherited=hydra_inherited())


@pytest.mark.parametrize("extra", [["data=addition"], ["model.family=encoder_decoder"]])
def test_the_synthetic_quickstart_runs_with_another_task_or_family(
    extra: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRANSFORMER_LAB_CACHE", str(tmp_path / "cache"))
    short = ["trainer.max_steps=2", "trainer.val_check_interval=2", "data.val_examples=16"]
    short += ["data.test_examples=16", "callbacks.progress_bar=null"]
    train_in_process(["experiment=synthetic_quickstart", *extra, *short], tmp_path / "run")
    assert (tmp_path / "run" / "metrics.json").is_file()
