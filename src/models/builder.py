"""config (plain names + numbers) -> model. The only place that reads a model config."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import src.models.components  # noqa: F401  (registers built-in components)
from src.errors import ConfigError
from src.models.config import ModelConfig
from src.models.families import FAMILIES, TransformerModel
from src.plain import to_plain
from src.registry import or_list


def model_config(cfg: ModelConfig | Mapping[str, Any]) -> ModelConfig:
    """A validated ``ModelConfig`` from a plain config (dict, DictConfig or ModelConfig): every
    check that building would make, without building (config validation calls this)."""
    config = cfg if isinstance(cfg, ModelConfig) else ModelConfig.from_dict(to_plain(cfg))
    config.validate()
    if config.family not in FAMILIES:
        raise ConfigError(f"model.family='{config.family}' is not known; use {or_list(FAMILIES.in_order())}")
    family = FAMILIES.get(config.family)
    family.check_config(config)
    family.check_placement(config)
    return config


def build_model(cfg: ModelConfig | Mapping[str, Any]) -> TransformerModel:
    """Build any registered family from a plain config (dict, DictConfig or ModelConfig)."""
    config = model_config(cfg)
    return FAMILIES.get(config.family)(config)
