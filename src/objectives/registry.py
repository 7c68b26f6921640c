"""The objective registry: ``objective=<name>`` picks ``conf/objective/<name>.yaml``, whose ``name``
is a key here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from src.registry import Registry

if TYPE_CHECKING:
    from src.objectives.base import LMTask

OBJECTIVES: Registry[LMTask] = Registry("objective", conf="objective", package="src.objectives")
