"""config (plain names + numbers) -> model. The only place that reads a model config."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import src.models.components  # noqa: F401  (registers built-in components)
from src.models.config import ModelConfig
from src.models.families import FAMILIES, TransformerModel


def to_plain(cfg: Any) -> dict[str, Any]:
    """OmegaConf DictConfig / dataclass / mapping -> plain dict."""
    if isinstance(cfg, ModelConfig):
        return cfg.to_dict()
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(cfg, DictConfig):
            return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    except ImportError:  # pragma: no cover
        pass
    if isinstance(cfg, Mapping):
        return dict(cfg)
    raise TypeError(f"cannot read a model config from {type(cfg).__name__}")


def build_model(cfg: ModelConfig | Mapping[str, Any]) -> TransformerModel:
    """Build any registered family from a plain config (dict, DictConfig or ModelConfig)."""
    config = cfg if isinstance(cfg, ModelConfig) else ModelConfig.from_dict(to_plain(cfg))
    config.validate()
    return FAMILIES.get(config.family)(config)
