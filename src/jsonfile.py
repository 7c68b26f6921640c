"""The JSON files of a run directory: read leniently, written atomically, strict JSON.

``metrics.json`` (schema: docs/CONTRACTS.md), ``extrapolation.json``, ``match_params.json``,
``grad_norms.json`` and the sweep stamp are all read and written here, so every writer
turns non-finite floats into ``null`` (``json.dumps`` would write ``NaN``, which strict JSON
readers reject) and every reader treats a missing or torn file the same way.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from src.files import atomic_write

METRICS = "metrics.json"  # a run's (or an evaluation's) final figures and status


def finite_or_null(x: Any) -> Any:
    """``x`` with every non-finite float (in nested dicts, lists, tuples) replaced by None."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, Mapping):
        return {k: finite_or_null(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite_or_null(v) for v in x]
    return x


def read_json(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The object in ``path``; None when the file is missing, unreadable or not JSON."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def write_json(path: str | os.PathLike[str], data: Mapping[str, Any], indent: int = 2) -> Path:
    """Write ``data`` to ``path`` via a temporary file and an atomic rename (a reader never
    sees half a file); non-finite floats become null."""
    return atomic_write(path, json.dumps(finite_or_null(dict(data)), indent=indent) + "\n")


def update_json(path: str | os.PathLike[str], updates: Mapping[str, Any]) -> Path:
    """Merge ``updates`` into the object in ``path`` (created when absent), atomically."""
    record = read_json(path) or {}
    record.update(updates)
    return write_json(path, record)
