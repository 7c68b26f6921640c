"""A resume continues the same run: any change of the checkpoint's model/task/data config is an
error listing the keys and the override that accepts them, whether or not the weights' shapes
still match; ``init_from`` (fine-tuning from the weights) is the separate path where the config
may differ. In-process runs of the tiny model (4 steps, checkpoint at step 4)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from src.checkpoints.io import safe_torch_load
from src.errors import CheckpointError


def _overrides(tiny: tuple[str, ...], *extra: str) -> list[str]:
    replaced = {e.split("=", 1)[0] for e in extra if "=" in e}
    keep = [
        a
        for a in tiny
        if a.split("=", 1)[0] not in replaced and not a.startswith("trainer.max_steps=")
    ]
    return [*keep, "trainer.max_steps=4", *extra]


@pytest.fixture(scope="module")
def trained(
    compose: Callable[..., Any],
    tiny: tuple[str, ...],
    token_cache: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """last.ckpt of a 4-step run."""
    from src.training.runner import train

    run = tmp_path_factory.mktemp("trained")
    train(compose(*_overrides(tiny), output_dir=run))
    return run / "checkpoints" / "last.ckpt"


def _resume(
    compose: Callable[..., Any], tiny: tuple[str, ...], ckpt: Path, tmp: Path, *extra: str
) -> None:
    from src.training.runner import train

    train(
        compose(
            *_overrides(tiny, "trainer.max_steps=6", f"ckpt_path={ckpt}", *extra), output_dir=tmp
        )
    )


@pytest.mark.parametrize(
    ("extra", "details", "keys"),
    [
        (["model.n_head=2"], "  model.n_head: checkpoint 4, now 2", "model.n_head"),
        (
            ["model/ffn=relu", "model.norm.eps=1e-6"],
            "  model.ffn.approximate: checkpoint 'tanh', now (absent)\n  model.ffn.name: checkpoint 'gelu', now 'relu'\n"
            "  model.norm.eps: checkpoint 1e-05, now 1e-06",
            "model.ffn.approximate,model.ffn.name,model.norm.eps",
        ),
        (
            ["model.dropout=0.1", "seed=7"],
            "  model.dropout: checkpoint 0.0, now 0.1\n  seed: checkpoint 1337, now 7",
            "model.dropout,seed",
        ),
    ],
    ids=["n_head-same-shapes", "ffn-and-norm-eps", "dropout-and-seed"],
)
def test_resume_refuses_a_different_run(
    compose: Callable[..., Any],
    tiny: tuple[str, ...],
    trained: Path,
    tmp_path: Path,
    extra: list[str],
    details: str,
    keys: str,
) -> None:
    with pytest.raises(CheckpointError) as info:
        _resume(compose, tiny, trained, tmp_path, *extra)
    n = details.count("\n") + 1
    # the file, every key that differs with both values, and the three ways on
    text = str(info.value)
    assert text.startswith(
        f"{trained} was trained with a different config ({n} key(s) differ):\n{details}\n"
    )
    assert (
        f"resume.allow_config_change=[{keys}]" in text
        and f"init_from={trained} ckpt_path=null" in text
    )
    assert ".hydra/config.yaml" in text


def test_allowed_changes_resume(
    compose: Callable[..., Any], tiny: tuple[str, ...], trained: Path, tmp_path: Path
) -> None:
    _resume(
        compose,
        tiny,
        trained,
        tmp_path,
        "model.dropout=0.1",
        "resume.allow_config_change=[model.dropout]",
    )
    assert safe_torch_load(tmp_path / "checkpoints" / "last.ckpt")["global_step"] == 6
    _resume(
        compose,
        tiny,
        trained,
        tmp_path / "node",
        "model.n_head=2",
        "model/ffn=relu",
        "resume.allow_config_change=[model]",
    )  # a node accepts every key under it
    with pytest.raises(
        CheckpointError, match=r"resume.allow_config_change='model.dropout' is invalid"
    ):
        _resume(
            compose,
            tiny,
            trained,
            tmp_path / "str",
            "model.dropout=0.1",
            "resume.allow_config_change=model.dropout",
        )


def test_init_from_is_fine_tuning(
    compose: Callable[..., Any], tiny: tuple[str, ...], trained: Path, tmp_path: Path
) -> None:
    """init_from: the checkpoint's weights, step 0, another config allowed; shapes must fit; not with ckpt_path."""
    from src.training.setup import build_run

    run = build_run(
        compose(
            *_overrides(tiny, "model.dropout=0.1", "optim.lr=1e-4", f"init_from={trained}"),
            output_dir=tmp_path,
        )
    )
    saved = safe_torch_load(trained)["state_dict"]
    assert all(torch.equal(v, saved[k]) for k, v in run.task.state_dict().items())
    with pytest.raises(
        CheckpointError,
        match=r"model.decoder.blocks.0.ffn.up.weight: checkpoint \[64, 32\], model \[128, 32\]",
    ):
        build_run(
            compose(
                *_overrides(tiny, "model.d_ff=128", f"init_from={trained}"), output_dir=tmp_path
            )
        )
    with pytest.raises(CheckpointError) as info:
        build_run(
            compose(
                *_overrides(tiny, f"init_from={trained}", f"ckpt_path={trained}"),
                output_dir=tmp_path,
            )
        )
    text = str(info.value)
    assert (
        f"init_from={trained}" in text
        and f"ckpt_path={trained}" in text
        and "keep one of them" in text
    )
