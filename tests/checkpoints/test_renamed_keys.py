"""A checkpoint whose run config holds the objective's node under its earlier name (``task``), or
lacks keys added since (``ADDED_RUN_KEYS``: the attention patterns of issue 59), loads for evaluation
and resumes its run, as one written today."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from src.checkpoints.integrity import seal
from src.checkpoints.io import safe_torch_load
from src.checkpoints.load import load_checkpoint
from tests.training.conftest import TINY, train_in_process


def _as_written_before_the_rename(ckpt_path: Path, dest: Path) -> None:
    raw = torch.load(ckpt_path, map_location="cpu", weights_only=True)
    raw.pop("integrity", None)
    cfg = raw["hyper_parameters"]["cfg"]
    cfg["task"] = cfg.pop("objective")
    torch.save(seal(raw), dest)


def test_an_old_checkpoint_loads_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRANSFORMER_LAB_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    train_in_process([*TINY, "seed=3"], run)
    old = tmp_path / "old.ckpt"
    _as_written_before_the_rename(run / "checkpoints" / "last.ckpt", old)
    assert (
        "task" in torch.load(old, map_location="cpu", weights_only=True)["hyper_parameters"]["cfg"]
    )

    cfg = safe_torch_load(old)["hyper_parameters"]["cfg"]
    assert cfg["objective"]["name"] == "causal_lm" and "task" not in cfg
    loaded = load_checkpoint(old)
    assert loaded.cfg["objective"]["name"] == "causal_lm"

    resumed = tmp_path / "resumed"
    train_in_process([*TINY, "seed=3", "trainer.max_steps=6", f"ckpt_path={old}"], resumed)
    assert (resumed / "metrics.json").is_file()


def test_a_checkpoint_from_before_the_attention_pattern_keys_loads_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from src.checkpoints.io import ADDED_RUN_KEYS

    monkeypatch.setenv("TRANSFORMER_LAB_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    train_in_process([*TINY, "seed=3"], run)
    raw = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    raw.pop("integrity", None)
    cfg = raw["hyper_parameters"]["cfg"]
    for dotted, value in ADDED_RUN_KEYS.items():
        node, key = dotted.split(".", 1)
        assert cfg[node].pop(key) == value, dotted  # today's run writes the neutral value
    old = tmp_path / "old.ckpt"
    torch.save(seal(raw), old)

    cfg = safe_torch_load(old)["hyper_parameters"]["cfg"]
    assert all(cfg[d.split(".")[0]][d.split(".", 1)[1]] == v for d, v in ADDED_RUN_KEYS.items())
    assert load_checkpoint(old).cfg["model"]["attention"] == {"name": "standard"}
    resumed = tmp_path / "resumed"
    train_in_process([*TINY, "seed=3", "trainer.max_steps=6", f"ckpt_path={old}"], resumed)
    assert (resumed / "metrics.json").is_file()
