"""The one-line errors of ``model/sinks`` (issue 59)."""

from __future__ import annotations

from pathlib import Path

import pytest

from src.errors import ConfigError, HFConversionError
from src.models import build_model
from src.models.config import ModelConfig
from src.models.hf import to_hf
from tests.conftest import tiny_model_dict


def test_encoder_decoder_refuses_sinks_naming_the_fix() -> None:
    cfg = tiny_model_dict(family="encoder_decoder", sinks={"name": "learned"})
    with pytest.raises(ConfigError, match=r"model/sinks=learned .*Set model/sinks=none") as err:
        ModelConfig.from_dict(cfg)
    assert "\n" not in str(err.value)


def test_unknown_sink_names_the_registered_ones() -> None:
    with pytest.raises(ConfigError, match=r"learned") as err:
        ModelConfig.from_dict(tiny_model_dict(sinks={"name": "lerned"}))
    assert "sinks" in str(err.value)


def test_learned_sink_takes_no_keys() -> None:
    with pytest.raises(ConfigError, match="count"):
        ModelConfig.from_dict(tiny_model_dict(sinks={"name": "learned", "count": 2}))


def test_encoder_decoder_and_decoder_only_accept_sinks_none() -> None:
    for family in ("encoder_decoder", "decoder_only", "encoder_only"):
        assert ModelConfig.from_dict(tiny_model_dict(family=family)).sinks == {"name": "none"}


@pytest.mark.parametrize("count", [0, -2, 1.5, True, "4"])
def test_sink_count_must_be_a_positive_integer(count: object) -> None:
    with pytest.raises(ConfigError, match=r"model\.sinks\.count=.* must be a positive") as err:
        ModelConfig.from_dict(tiny_model_dict(sinks={"name": "token", "count": count}))
    assert "\n" not in str(err.value)


def test_encoder_decoder_refuses_sink_tokens() -> None:
    cfg = tiny_model_dict(family="encoder_decoder", sinks={"name": "token", "count": 2})
    with pytest.raises(ConfigError, match=r"model/sinks=token .*Set model/sinks=none"):
        ModelConfig.from_dict(cfg)


@pytest.mark.parametrize("sinks", [{"name": "learned"}, {"name": "token", "count": 2}])
def test_no_transformers_format_takes_sinks(sinks: dict[str, object], tmp_path: Path) -> None:
    """A transformers checkpoint has no field for them: export refuses, naming the key."""
    pytest.importorskip("transformers")
    model = build_model(tiny_model_dict(sinks=sinks))
    with pytest.raises(HFConversionError, match=r"model\.sinks=.*needs \{'name': 'none'\}"):
        to_hf(model, tmp_path)
