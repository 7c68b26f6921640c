"""Bad attention-pattern settings (issue 59): each refused in one line naming the key, the value
and the fix, where the model config is validated (``ModelConfig.validate``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from src.errors import ConfigError
from src.models.config import ModelConfig
from tests.conftest import tiny_model_dict

SW = {"name": "sliding_window", "window": 4}


@pytest.mark.parametrize(
    "overrides,names,fix",
    [
        ({"mask": {"name": "sliding_window", "window": 0}}, "model.mask.window=0", "positive"),
        ({"mask": {"name": "sliding_window", "window": -3}}, "model.mask.window=-3", "positive"),
        ({"mask": {"name": "sliding_window", "window": 2.5}}, "model.mask.window=2.5", "integer"),
        ({"attn_softcap": 0.0}, "model.attn_softcap=0.0", "positive number"),
        ({"final_softcap": -30.0}, "model.final_softcap=-30.0", "positive number"),
        ({"mask": SW, "layer_masks": ["sliding_windw"]}, "'sliding_windw'", "sliding_window?"),
        ({"mask": SW, "layer_masks": ["local"]}, "'local'", "registered masks"),
        ({"mask": SW, "layer_masks": "causal"}, "model.layer_masks='causal'", "list"),
        ({"mask": SW, "layer_masks": []}, "model.layer_masks=[]", "null"),
        ({"mask": SW, "layer_masks": ["causal", "bidirectional"]}, "'bidirectional'", "causal"),
        ({"layer_masks": ["sliding_window", "causal"]}, "model.mask.window", "model/mask="),
        (
            {"family": "encoder_decoder", "mask": SW},
            "model/mask=sliding_window",
            "model.mask=null",
        ),
        (
            {"family": "encoder_decoder", "layer_masks": ["sliding_window", "causal"]},
            "model.layer_masks=",
            "model.layer_masks=null",
        ),
    ],
)
def test_bad_attention_pattern(overrides: dict[str, Any], names: str, fix: str) -> None:
    with pytest.raises(ConfigError) as info:
        ModelConfig.from_dict(tiny_model_dict(**overrides))
    message = str(info.value)
    assert "\n" not in message
    assert names in message and fix in message


def test_window_at_least_the_context_is_allowed_with_a_note(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO):
        ModelConfig.from_dict(tiny_model_dict(mask={"name": "sliding_window", "window": 32}))
    notes = [r.getMessage() for r in caplog.records if "sliding window" in r.getMessage()]
    assert len(notes) == 1 and "\n" not in notes[0]
    assert "model.mask.window=32" in notes[0] and "causal" in notes[0]
    caplog.clear()
    with caplog.at_level(logging.INFO):
        ModelConfig.from_dict(tiny_model_dict(mask={"name": "sliding_window", "window": 31}))
    assert not [r for r in caplog.records if "sliding window" in r.getMessage()]


def test_good_patterns_pass() -> None:
    c = ModelConfig.from_dict(
        tiny_model_dict(
            mask=SW,
            layer_masks=["sliding_window"] * 5 + ["causal"],
            attn_softcap=50.0,
            final_softcap=30,
        )
    )
    assert [n["name"] for n in c.layer_mask_nodes(7)] == [
        *["sliding_window"] * 5,
        "causal",
        "sliding_window",
    ]
    assert c.layer_mask_nodes(1)[0] == SW  # the entry takes model.mask's window
    encoder = ModelConfig.from_dict(
        tiny_model_dict(
            family="encoder_only", mask=SW, layer_masks=["sliding_window", "bidirectional"]
        )
    )
    assert encoder.layer_masks == ["sliding_window", "bidirectional"]
