"""A NaN injected into the loss at step k: ``stop`` ends the run with the documented message and
keeps the previous checkpoint loadable and finite; ``skip`` drops that update and finishes.

Runs are in-process tiny CPU runs (``src.training.runner.train`` on composed conf/train.yaml);
``tests.faults.FaultInjector(nan_loss_step=k)`` makes step k's logits NaN, so the loss,
the gradients and, after the optimizer step, the weights are non-finite.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from src.checkpoints.io import safe_torch_load
from src.errors import NonFiniteLossError
from src.training.runner import train

NAN = ["+callbacks.faults._target_=tests.faults.FaultInjector", "+callbacks.faults.nan_loss_step=6"]


def _finite(ckpt: dict[str, Any]) -> bool:
    return all(
        torch.isfinite(t).all() for t in ckpt["state_dict"].values() if t.is_floating_point()
    )


@pytest.mark.parametrize(
    "check_every", [1, 50], ids=["periodic-check", "checked-at-validation-and-save"]
)
def test_nan_loss_stops_and_keeps_last_good_checkpoint(
    check_every: int,
    compose: Callable[..., Any],
    tiny: tuple[str, ...],
    tmp_path: Path,
    token_cache: str,
) -> None:
    cfg = compose(
        *tiny, *NAN, f"reliability.check_every_n_steps={check_every}", output_dir=tmp_path
    )
    with pytest.raises(NonFiniteLossError) as info:
        train(cfg)
    last = tmp_path / "checkpoints" / "last.ckpt"
    # the step, the setting that stopped it, the checkpoint to resume from, the fixes
    text = str(info.value)
    assert (
        "non-finite training loss (NaN/inf) at step 6; the run stopped (reliability.nonfinite=stop)"
        in text
    )
    assert (
        f"Last good checkpoint: {last}." in text
        and "lower optim.lr" in text
        and "reliability.nonfinite=skip" in text
    )

    record = json.loads((tmp_path / "metrics.json").read_text())
    assert record["status"] == "failed"
    assert record["error"] == f"NonFiniteLossError: {text}"
    # stopped at the first host check after step 6: step 7 (every step) or the validation at step 8
    assert record["global_step"] == (7 if check_every == 1 else 8)

    # the checkpoint from before the NaN (step 4) is the newest on disk, loads weights-only, and is finite
    ckpts = sorted((tmp_path / "checkpoints").glob("*.ckpt"))
    assert [p.name for p in ckpts] == ["best-000004.ckpt", "last.ckpt"]
    for p in ckpts:
        ckpt = safe_torch_load(p)
        assert ckpt["global_step"] == 4
        assert _finite(ckpt)
    assert not list((tmp_path / "checkpoints").glob(".*.tmp"))


def test_nan_loss_skip_drops_the_update(
    compose: Callable[..., Any], tiny: tuple[str, ...], tmp_path: Path, token_cache: str
) -> None:
    cfg = compose(
        *tiny, *NAN, "reliability.nonfinite=skip", "trainer.max_steps=8", output_dir=tmp_path
    )
    train(cfg)
    record = json.loads((tmp_path / "metrics.json").read_text())
    assert record["status"] == "completed" and record["global_step"] == 8
    assert record["train/nonfinite_skips"] == 1.0
    last = safe_torch_load(tmp_path / "checkpoints" / "last.ckpt")
    assert last["global_step"] == 8 and _finite(last)
    guard = next(v for k, v in last["callbacks"].items() if k.startswith("NonFiniteGuard"))
    assert guard == {"skipped": 1}
