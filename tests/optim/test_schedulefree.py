"""optim=schedulefree in real (tiny, in-process) runs: validation scores the averaged weights x,
checkpoints hold them, and a run resumed from a checkpoint continues bit-identically."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from src.checkpoints.io import safe_torch_load
from src.errors import ConfigError
from tests.optim.probe import WeightsAtValidation

SF = [
    "optim=schedulefree",
    "scheduler=none",
    "optim.lr=3e-3",
    "optim.warmup_steps=2",
    "trainer.val_check_interval=4",
    "+callbacks.probe._target_=tests.optim.probe.WeightsAtValidation",
]


def _overrides(tiny: tuple[str, ...], *extra: str) -> list[str]:
    replaced = {e.split("=", 1)[0] for e in extra}
    drop = (
        "scheduler.warmup_steps=",
        "trainer.max_steps=",
        "optim.lr=",
        "trainer.val_check_interval=",
    )
    keep = [a for a in tiny if a.split("=", 1)[0] not in replaced and not a.startswith(drop)]
    return [*keep, *SF, *extra]


@pytest.fixture(scope="module")
def runs(
    compose: Callable[..., Any],
    tiny: tuple[str, ...],
    token_cache: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    """An uninterrupted 8-step run, and a 4-step run resumed to 8 (validation and a save every 4 steps)."""
    from src.training.runner import train

    out: dict[str, Any] = {}
    WeightsAtValidation.records.clear()
    full = tmp_path_factory.mktemp("sf_full")
    train(compose(*_overrides(tiny, "trainer.max_steps=8"), output_dir=full))
    out["full"], out["records"] = full, list(WeightsAtValidation.records)
    first = tmp_path_factory.mktemp("sf_first")
    train(compose(*_overrides(tiny, "trainer.max_steps=4"), output_dir=first))
    resumed = tmp_path_factory.mktemp("sf_resumed")
    train(
        compose(
            *_overrides(
                tiny, "trainer.max_steps=8", f"ckpt_path={first / 'checkpoints' / 'last.ckpt'}"
            ),
            output_dir=resumed,
        )
    )
    out["resumed"] = resumed
    # saves in the middle of training (train mode: the switch goes to x and back), every 3 steps
    every3 = [
        "callbacks.model_checkpoint.monitor=null",
        "callbacks.model_checkpoint.every_n_train_steps=3",
        "callbacks.model_checkpoint.save_top_k=-1",
    ]
    out["every3"] = tmp_path_factory.mktemp("sf_every3")
    train(compose(*_overrides(tiny, "trainer.max_steps=8", *every3), output_dir=out["every3"]))
    out["every3_resumed"] = tmp_path_factory.mktemp("sf_every3_resumed")
    step3 = out["every3"] / "checkpoints" / "best-000003.ckpt"
    train(
        compose(
            *_overrides(tiny, "trainer.max_steps=8", *every3, f"ckpt_path={step3}"),
            output_dir=out["every3_resumed"],
        )
    )
    return out


@pytest.mark.slow  # five tiny runs (about 15 s) shared by the module
def test_validation_scores_and_checkpoints_hold_the_averaged_weights(runs: dict[str, Any]) -> None:
    records = runs["records"]
    assert [r["step"] for r in records] == [4, 8]
    # eval(): the weights are x
    assert all(mode is False for r in records for mode in r["train_mode"])
    ckpt = safe_torch_load(runs["full"] / "checkpoints" / "last.ckpt")
    assert ckpt["global_step"] == 8
    saved, validated = ckpt["state_dict"], records[-1]["weights"]
    assert saved.keys() == validated.keys() and all(
        torch.equal(saved[k], validated[k]) for k in saved
    )
    opt = ckpt["optimizer_states"][0]
    assert all(g["train_mode"] is False for g in opt["param_groups"])  # the file is in eval mode: x
    beta1 = opt["param_groups"][0]["betas"][0]
    # the training weights y = (1 - beta1)·z + beta1·x differ from the saved x: validation did not score y
    z = [s["z"] for s in opt["state"].values()]
    xs = [v for k, v in saved.items() if k.startswith("model.")]
    assert z and any(
        not torch.equal(x.lerp(zz, 1 - beta1), x) for x in xs for zz in z if zz.shape == x.shape
    )


@pytest.mark.slow  # five tiny runs (about 15 s) shared by the module
def test_a_resumed_run_continues_bit_identically(runs: dict[str, Any]) -> None:
    a = safe_torch_load(runs["full"] / "checkpoints" / "last.ckpt")
    b = safe_torch_load(runs["resumed"] / "checkpoints" / "last.ckpt")
    assert a["global_step"] == b["global_step"] == 8
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])
    sa, sb = a["optimizer_states"][0], b["optimizer_states"][0]
    assert sa["param_groups"] == sb["param_groups"]
    for i in sa["state"]:
        assert all(torch.equal(sa["state"][i][k], sb["state"][i][k]) for k in sa["state"][i])
    ma = json.loads((Path(runs["full"]) / "metrics.json").read_text())
    mb = json.loads((Path(runs["resumed"]) / "metrics.json").read_text())
    assert ma["val/loss"] == mb["val/loss"] and ma["train/loss"] == mb["train/loss"]


@pytest.mark.slow  # five tiny runs (about 15 s) shared by the module
def test_a_save_in_training_holds_x_and_the_resumed_run_is_bit_identical(
    runs: dict[str, Any],
) -> None:
    step3 = safe_torch_load(runs["every3"] / "checkpoints" / "best-000003.ckpt")
    assert step3["global_step"] == 3
    # written as x
    assert all(g["train_mode"] is False for g in step3["optimizer_states"][0]["param_groups"])
    a = safe_torch_load(runs["every3"] / "checkpoints" / "best-000006.ckpt")
    b = safe_torch_load(runs["every3_resumed"] / "checkpoints" / "best-000006.ckpt")
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])
    assert not all(torch.equal(a["state_dict"][k], step3["state_dict"][k]) for k in a["state_dict"])
    ma = json.loads((Path(runs["every3"]) / "metrics.json").read_text())
    mb = json.loads((Path(runs["every3_resumed"]) / "metrics.json").read_text())
    assert ma["global_step"] == mb["global_step"] == 8 and ma["val/loss"] == mb["val/loss"]


def test_a_moving_schedule_is_refused_at_validation(
    compose: Callable[..., Any], tiny: tuple[str, ...]
) -> None:
    from src.config.validate import validate_run_config

    with pytest.raises(ConfigError) as e:
        validate_run_config(
            compose(
                *[a for a in tiny if not a.startswith("scheduler")],
                "optim=schedulefree",
                "scheduler=cosine",
            )
        )
    assert "optim=schedulefree" in str(e.value) and "scheduler=cosine" in str(e.value)
