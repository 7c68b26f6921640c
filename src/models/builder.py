"""config (plain names + numbers) -> model. The only place that reads a model config."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from src.models.config import ModelConfig
from src.models.families import FAMILIES, TransformerModel
from src.plain import to_plain


def model_config(cfg: ModelConfig | Mapping[str, Any]) -> ModelConfig:
    """A ``ModelConfig`` from a plain config (dict, DictConfig), validated once by ``from_dict``;
    a ``ModelConfig`` is returned as it is (it was validated when it was made)."""
    return cfg if isinstance(cfg, ModelConfig) else ModelConfig.from_dict(to_plain(cfg))


def build_model(cfg: ModelConfig | Mapping[str, Any]) -> TransformerModel:
    """Build any registered family from a plain config (dict, DictConfig or ModelConfig)."""
    config = model_config(cfg)
    return FAMILIES.get(config.family)(config)
