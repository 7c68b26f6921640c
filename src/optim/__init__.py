"""Optimisers and learning-rate schedules as comparable variants (``optim=…``, ``scheduler=…``).

One file per variant, each a frozen config dataclass registered by name in ``OPTIMIZERS`` or
``SCHEDULES`` (``base.py``) with its YAML in ``conf/optim/`` / ``conf/scheduler/``; the registries
import this package's modules on their first lookup, so a new variant needs no import line here.
"""

from src.optim.adamw import AdamW
from src.optim.base import (
    OPTIMIZERS,
    SCHEDULES,
    OptimizerConfig,
    Schedule,
    check_pair,
    fused_devices,
    optimizer_config,
    param_groups,
    schedule_config,
)
from src.optim.cosine import Constant, Cosine, NoSchedule, WarmupCosine

__all__ = [
    "OPTIMIZERS",
    "SCHEDULES",
    "AdamW",
    "Constant",
    "Cosine",
    "NoSchedule",
    "OptimizerConfig",
    "Schedule",
    "WarmupCosine",
    "check_pair",
    "fused_devices",
    "optimizer_config",
    "param_groups",
    "schedule_config",
]
