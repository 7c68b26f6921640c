"""The end-of-fit extrapolation callback with RoPE scalings: one prefix per scaling, not applicable
(with the reason) for a model without rotary frequencies, one JSON file per scaling."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from src.callbacks.length_extrapolation import LengthExtrapolation
from src.models import build_model
from tests.conftest import tiny_model_dict


def run(position: str, tmp_path: Path) -> tuple[LengthExtrapolation, SimpleNamespace]:
    tokens = torch.randint(0, 97, (1 + 4 * 64,), generator=torch.Generator().manual_seed(0))
    trainer = SimpleNamespace(
        datamodule=SimpleNamespace(tokens={"val": tokens}),
        callback_metrics={},
        loggers=[],
        global_step=3,
    )
    module = SimpleNamespace(
        model=build_model(tiny_model_dict(max_seq_len=32, position={"name": position})),
        cfg={"block_size": 32},
    )
    cb = LengthExtrapolation(
        factors=[1, 2], output_dir=str(tmp_path), scalings=["linear", {"name": "yarn", "factor": 4}]
    )
    cb.on_fit_end(trainer, module)  # type: ignore[arg-type]
    return cb, trainer


def test_each_scaling_has_its_metrics_and_file(tmp_path: Path) -> None:
    cb, trainer = run("rope", tmp_path)
    for prefix in ("extrapolation", "extrapolation/linear", "extrapolation/yarn"):
        assert (
            cb.metrics[f"{prefix}/ppl@2x"] is not None
            and f"{prefix}/ppl@2x" in trainer.callback_metrics
        )
    assert cb.metrics["extrapolation/linear/ppl@1x"] == pytest.approx(
        cb.metrics["extrapolation/ppl@1x"], rel=1e-5
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "extrapolation.json",
        "extrapolation_linear.json",
        "extrapolation_yarn.json",
    ]
    yarn = json.loads((tmp_path / "extrapolation_yarn.json").read_text())
    assert [x["scaling"]["factor"] for x in yarn["lengths"]] == [
        4,
        4,
    ]  # the node's own factor is kept


def test_a_model_without_rotary_frequencies_is_not_applicable(tmp_path: Path) -> None:
    cb, _ = run("alibi", tmp_path)
    assert cb.metrics["extrapolation/ppl@2x"] is not None  # ALiBi itself extrapolates
    assert cb.metrics["extrapolation/linear/ppl@2x"] is None
    assert (
        "model.position.scaling is RoPE frequency scaling"
        in cb.metrics["extrapolation/linear/note@2x"]
    )
