"""``src.inspect pretrained=<dir>`` reads a config.json without weights beside it: absurd sizes (a damaged or
edited file) are refused against a stated limit before anything is built (issue 21, item 12)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from src.errors import HFConversionError
from src.inspection.model_report import load_model_config
from src.models.sizes import MAX_LAYERS

GPT2 = {
    "model_type": "gpt2",
    "vocab_size": 100,
    "n_embd": 32,
    "n_layer": 2,
    "n_head": 2,
    "n_positions": 64,
}


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("n_layer", 1_000_000, "model.n_layer=1000000"),
        ("vocab_size", 10**12, "model.vocab_size=1000000000000"),
    ],
)
def test_absurd_sizes_are_refused_before_building(
    tmp_path: Path, key: str, value: int, named: str
) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**GPT2, key: value}))
    start = time.perf_counter()
    with pytest.raises(HFConversionError) as e:
        load_model_config(OmegaConf.create({"pretrained": str(tmp_path)}))
    assert time.perf_counter() - start < 5  # refused at once, nothing built
    assert (
        str(tmp_path / "config.json") in str(e.value)
        and named in str(e.value)
        and "stated limit" in str(e.value)
    )


def test_a_real_size_passes(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**GPT2, "n_layer": 48}))  # GPT-2 XL's depth
    cfg, source = load_model_config(OmegaConf.create({"pretrained": str(tmp_path)}))
    assert cfg.n_layer == 48 < MAX_LAYERS and source == f"pretrained={tmp_path}"
