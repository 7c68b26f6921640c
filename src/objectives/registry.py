"""The task registry: ``task=<name>`` picks ``conf/task/<name>.yaml``, whose ``name`` is a
key here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from src.registry import Registry

if TYPE_CHECKING:
    from src.objectives.base import LMTask

TASKS: Registry[LMTask] = Registry("task", package="src.objectives")
