"""scheduler.decay_from: a cooldown branch off a stable-phase checkpoint is the WSD run of its own
length (bit for bit), and a checkpoint of another run, or from past the stable phase, is refused
at validation naming the key."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from src.errors import ConfigError

WSD = [
    "scheduler=wsd",
    "scheduler.warmup_steps=2",
    "scheduler.decay_shape=linear",
    "trainer.val_check_interval=4",
    "callbacks.model_checkpoint.save_top_k=-1",
]  # keep every validation's checkpoint (best-<step>.ckpt)


def _overrides(tiny: tuple[str, ...], *extra: str) -> list[str]:
    replaced = {e.split("=", 1)[0] for e in extra}
    drop = ("scheduler", "trainer.max_steps=", "trainer.val_check_interval=")
    keep = [a for a in tiny if a.split("=", 1)[0] not in replaced and not a.startswith(drop)]
    return [*keep, *WSD, *extra]


@pytest.fixture(scope="module")
def trunk(
    compose: Callable[..., Any],
    tiny: tuple[str, ...],
    token_cache: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """An 8-step WSD run decaying over its last half (S = 4): stable-phase checkpoint at step 4."""
    from src.training.runner import train

    run = tmp_path_factory.mktemp("trunk")
    train(
        compose(
            *_overrides(tiny, "trainer.max_steps=8", "scheduler.decay_fraction=0.5"), output_dir=run
        )
    )
    return run / "checkpoints"


@pytest.mark.slow  # the trunk and two branches: tiny runs of a few seconds each
def test_a_branch_is_the_run_of_its_length(
    compose: Callable[..., Any], tiny: tuple[str, ...], trunk: Path, tmp_path: Path
) -> None:
    """6 steps, decay over the last 2 (S = 4): from the trunk's step-4 checkpoint, or from scratch."""
    from src.training.runner import train

    six = ["trainer.max_steps=6", "scheduler.decay_fraction=0.3"]
    train(
        compose(
            *_overrides(tiny, *six, f"scheduler.decay_from={trunk / 'best-000004.ckpt'}"),
            output_dir=tmp_path / "branch",
        )
    )
    train(compose(*_overrides(tiny, *six), output_dir=tmp_path / "scratch"))
    branch, scratch = (
        json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("branch", "scratch")
    )
    assert branch["global_step"] == scratch["global_step"] == 6
    assert (
        branch["val/loss"] == scratch["val/loss"] and branch["train/loss"] == scratch["train/loss"]
    )
    trunk_metrics = json.loads((trunk.parent / "metrics.json").read_text())
    assert branch["val/loss"] != trunk_metrics["val/loss"]  # a different budget, a different model
    lr = [k for k in branch if k.startswith("lr-")]
    # step 5 of 6: halfway down the linear decay
    assert lr and branch[lr[0]] == pytest.approx(2e-3 * 0.5)


def _refused(compose: Callable[..., Any], overrides: list[str], *parts: str) -> None:
    from src.config.validate import validate_run_config

    with pytest.raises(ConfigError) as e:
        validate_run_config(compose(*overrides))
    assert all(p in str(e.value) for p in parts), str(e.value)


@pytest.mark.slow  # the trunk and two branches: tiny runs of a few seconds each
def test_a_checkpoint_of_another_run_is_refused(
    compose: Callable[..., Any], tiny: tuple[str, ...], trunk: Path
) -> None:
    ckpt = trunk / "best-000004.ckpt"
    six = ["trainer.max_steps=6", "scheduler.decay_fraction=0.3", f"scheduler.decay_from={ckpt}"]
    _refused(
        compose,
        _overrides(tiny, *six, "seed=7"),
        f"scheduler.decay_from={ckpt}",
        "another run",
        "seed: checkpoint 1337, now 7",
    )
    _refused(
        compose,
        _overrides(tiny, *six, "optim.lr=1e-3"),
        f"scheduler.decay_from={ckpt}",
        "another run",
        "optim",
    )
    _refused(
        compose,
        _overrides(tiny, *six, "scheduler.warmup_steps=3"),
        f"scheduler.decay_from={ckpt}",
        "not a stable-phase checkpoint",
        "warmup_steps=2",
    )


@pytest.mark.slow  # the trunk and two branches: tiny runs of a few seconds each
def test_a_checkpoint_past_the_stable_phase_is_refused(
    compose: Callable[..., Any], tiny: tuple[str, ...], trunk: Path
) -> None:
    step4, step8 = trunk / "best-000004.ckpt", trunk / "best-000008.ckpt"
    # this branch would start decaying at step 3 (5 - round(2.5)), before the checkpoint's step 4
    _refused(
        compose,
        _overrides(
            tiny,
            "trainer.max_steps=5",
            "scheduler.decay_fraction=0.5",
            f"scheduler.decay_from={step4}",
        ),
        f"scheduler.decay_from={step4}",
        "past the stable phase of this run",
        "step 3",
        "trainer.max_steps",
    )
    # the trunk had begun to decay at step 4: its step-8 weights are decayed
    _refused(
        compose,
        _overrides(
            tiny,
            "trainer.max_steps=40",
            "scheduler.decay_fraction=0.2",
            f"scheduler.decay_from={step8}",
        ),
        f"scheduler.decay_from={step8}",
        "past the stable phase",
        "began to decay at step 4",
    )
    _refused(
        compose,
        _overrides(
            tiny, "trainer.max_steps=40", f"scheduler.decay_from={step4}", f"init_from={step4}"
        ),
        "scheduler.decay_from",
        "init_from=null",
    )


@pytest.mark.slow  # the trunk and one branch: tiny runs of a few seconds each
def test_ckpt_path_beside_decay_from_is_held_to_the_stable_phase(
    compose: Callable[..., Any], tiny: tuple[str, ...], trunk: Path, tmp_path: Path
) -> None:
    """Issue 53: ``ckpt_path`` beside ``decay_from`` skipped the stable-phase check, so a branch
    restored the trunk's decayed step 8 and completed as a different model. A checkpoint of the
    branch itself resumes it; any other is held to decay_from's rule."""
    from src.config.validate import validate_run_config
    from src.training.runner import train

    six = [
        "trainer.max_steps=6",
        "scheduler.decay_fraction=0.3",
        f"scheduler.decay_from={trunk / 'best-000004.ckpt'}",
    ]
    past = trunk / "best-000008.ckpt"
    _refused(
        compose,
        _overrides(tiny, *six, f"ckpt_path={past}"),
        f"ckpt_path={past} is not a checkpoint of this cooldown branch",
        "past the stable phase",
        "~ckpt_path",
    )
    # the branch's own checkpoint (saved during its decay) resumes it
    train(compose(*_overrides(tiny, *six), output_dir=tmp_path / "branch"))
    own = tmp_path / "branch" / "checkpoints" / "last.ckpt"
    spec = validate_run_config(compose(*_overrides(tiny, *six, f"ckpt_path={own}")))
    assert spec.plain["ckpt_path"] == str(own)
