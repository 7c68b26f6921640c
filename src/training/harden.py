"""Install the run's safety nets on a built Trainer: ``SafeCheckpointIO`` (atomic, verified,
weights-only checkpoints; ``src.checkpoints.io``), the ``NonFiniteGuard`` and ``Preemption``
callbacks (``src.callbacks.nonfinite``, ``src.callbacks.preemption``). docs/reliability.md."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.pytorch.callbacks import Checkpoint

from src.callbacks.nonfinite import NonFiniteGuard
from src.callbacks.preemption import Preemption
from src.checkpoints.io import SafeCheckpointIO

log = logging.getLogger(__name__)

__all__ = ["harden_trainer"]


def harden_trainer(trainer: Any, cfg: Mapping[str, Any] | Any) -> Any:
    """Install ``SafeCheckpointIO`` (atomic, verified, weights-only), ``NonFiniteGuard`` and
    ``Preemption`` (SIGTERM / SLURM's signal -> last.ckpt at the current step) on ``trainer``.

    cfg: the run config; its ``reliability`` node (``nonfinite``, ``check_every_n_steps``,
    ``max_consecutive_skips``) configures the guard, ``abandon_step_after_s`` the preemption. A custom CheckpointIO already set on the
    strategy is kept, with a warning. Returns the trainer.
    """
    strategy = trainer.strategy
    io = strategy.checkpoint_io
    if isinstance(io, SafeCheckpointIO) or type(io) is TorchCheckpointIO:
        safe = io if isinstance(io, SafeCheckpointIO) else SafeCheckpointIO()
        safe.attach(trainer)
        strategy.checkpoint_io = safe
    else:
        log.warning(
            "trainer uses %s: checkpoints are not written atomically nor loaded weights-only by "
            "SafeCheckpointIO (docs/reliability.md)",
            type(io).__name__,
        )
    rel = dict((cfg.get("reliability") if hasattr(cfg, "get") else None) or {})
    if not any(isinstance(c, NonFiniteGuard) for c in trainer.callbacks):
        guard = NonFiniteGuard(
            action=str(rel.get("nonfinite", "stop")),
            check_every_n_steps=int(rel.get("check_every_n_steps", 50)),
            max_consecutive_skips=int(rel.get("max_consecutive_skips", 10)),
        )
        at = next(
            (i for i, c in enumerate(trainer.callbacks) if isinstance(c, Checkpoint)),
            len(trainer.callbacks),
        )
        # before the checkpoint callbacks, like Lightning orders them
        trainer.callbacks.insert(at, guard)
    if not any(isinstance(c, Preemption) for c in trainer.callbacks):
        after = rel.get("abandon_step_after_s", 10.0)
        trainer.callbacks.append(Preemption(None if after is None else float(after)))
    return trainer
