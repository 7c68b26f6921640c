"""Per-rank fingerprints of the training data and the final weights (to check data-parallel runs).

Writes ``<output_dir>/fingerprints/rank<r>.json``: ``{"rank", "world_size", "batches": [sha1 of
each training batch], "weights": sha1 of the final parameters}``. Ranks of a correct DDP run
see different batches and end with identical weights.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

from src.files import atomic_write


def tensor_digest(tensors: list[torch.Tensor]) -> str:
    h = hashlib.sha1()
    for t in tensors:
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


class Fingerprint(pl.Callback):
    """Hashes every training batch and, at the end of fitting, the parameters (every rank)."""

    def __init__(self, output_dir: str) -> None:
        self.output_dir = Path(output_dir)
        self.batches: list[str] = []

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self.batches.append(tensor_digest([batch[k] for k in sorted(batch)]))

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        out = self.output_dir / "fingerprints"
        out.mkdir(parents=True, exist_ok=True)
        record = {
            "rank": trainer.global_rank,
            "world_size": trainer.world_size,
            "batches": self.batches,
            "weights": tensor_digest([p for p in pl_module.parameters()]),
        }
        atomic_write(out / f"rank{trainer.global_rank}.json", json.dumps(record, indent=1))
