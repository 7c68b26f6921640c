"""``metrics.json`` in the run directory (schema: docs/CONTRACTS.md), written atomically.

``{"status": "completed" | "failed", "error": str | null, "params", "tokens_seen", "wall_time_s",
"throughput_tokens_per_s", "best_step", "global_step", "val/loss", "val/ppl", "test/loss", "test/ppl", ...}``
— every scalar logged last in the run (keys as logged), plus ``val/loss_best``.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

FILENAME = "metrics.json"


def _clean(v: Any) -> Any:
    """JSON-safe: non-finite floats become null (json.dumps would write NaN, which is not JSON)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def write_metrics(run_dir: str | os.PathLike[str], record: dict[str, Any]) -> Path:
    """Write ``record`` to ``<run_dir>/metrics.json`` via a temporary file and an atomic rename."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    dest = run_dir / FILENAME
    tmp = dest.with_name(f".{FILENAME}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({k: _clean(v) for k, v in record.items()}, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, dest)
    return dest


def read_metrics(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    return json.loads((Path(run_dir) / FILENAME).read_text())
