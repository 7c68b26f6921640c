"""Plain data from a config: an OmegaConf node, a dataclass or a mapping -> a ``dict``.

The one conversion every layer uses (the model builder, the run setup, config validation,
matched sizes), so a config reads the same everywhere: interpolations resolved, Hydra's own
``hydra`` node left out (and not resolved: it holds ``${hydra:...}`` runtime values), a
mandatory ``???`` left as the string for the validator to name.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any


def to_plain(cfg: Any) -> Any:
    """A resolved, plain-data deep copy of ``cfg`` (lists and scalars come back as they are)."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf
    # a bare environment (perf/gpu_check.py needs only torch): no OmegaConf nodes exist
    except ImportError:
        DictConfig = ListConfig = ()  # type: ignore[assignment,misc]

    if isinstance(cfg, DictConfig):
        if "hydra" in cfg:
            cfg = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
        return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    if isinstance(cfg, ListConfig):
        return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return dataclasses.asdict(cfg)
    if isinstance(cfg, Mapping):
        plain = copy.deepcopy(dict(cfg))
        plain.pop("hydra", None)
        return plain
    return cfg
