"""``scheduler=wsd``: warmup, stable, decay (Hu et al. 2024, MiniCPM, arXiv:2404.06395; Hägele
et al. 2024, "Scaling Laws and Compute-Optimal Training Beyond Fixed Training Durations",
arXiv:2405.18392), and its cooldown branches (``decay_from``).

Over a run of ``T = trainer.max_steps`` optimiser steps (step ``s`` counted from 0)::

    warmup   s < W                 (s + 1) / (W + 1)                       W = warmup_steps
    stable   W <= s < S            1                                       S = T - round(decay_fraction · T)
    decay    S <= s < T            m + (1 - m) · shape((s - S) / (T - S))  m = min_lr / lr
                                   shape(u): linear 1 - u | cosine (1 + cos πu)/2 | 1-sqrt 1 - √u
    after    s >= T                m

(the multiplier of ``optim.lr``). Hägele et al. find ``1-sqrt`` with a 20 % cooldown matches a
cosine schedule tuned to the same length.

**Cooldown branches.** The stable phase does not depend on the horizon ``T``, so one long run at
the stable learning rate is the common trunk of every shorter WSD run: a checkpoint of it at step
``c`` is where a run of any length ``T`` with ``S >= c`` stands at step ``c``.
``scheduler.decay_from=<that checkpoint>`` with ``trainer.max_steps=T`` continues from it (weights,
optimiser state, step, data position: Lightning's resume) and decays over ``[S, T)``; each branch is
a full-length WSD run at a different token budget, for the price of its cooldown (Hägele et al.
§4: scaling laws from one run). The run validation refuses a checkpoint from another run (model,
objective, data, batches, optimiser or warmup differ) and one from past the stable phase (its own
run's decay had begun, or ``c > S`` here); see ``check_branch``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch.optim.lr_scheduler import LRScheduler

from src.errors import ConfigError
from src.optim.base import SCHEDULES, ScheduleLR, Warmup, is_number

SHAPES = ("linear", "cosine", "1-sqrt")


def decay_shape(shape: str, u: float) -> float:
    """The decay from 1 to 0 as ``u`` (the decay phase's progress) goes from 0 to 1."""
    if shape == "linear":
        return 1.0 - u
    if shape == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * u))
    return 1.0 - math.sqrt(u)  # 1-sqrt (Hägele et al. 2024, eq. 2)


class WarmupStableDecay:
    """The WSD multiplier for ``ScheduleLR`` (see the module docstring)."""

    def __init__(
        self, warmup_steps: int, decay_start: int, total_steps: int, shape: str, min_ratio: float
    ) -> None:
        self.warmup_steps, self.decay_start, self.total_steps = (
            warmup_steps,
            decay_start,
            total_steps,
        )
        self.shape, self.min_ratio = shape, min_ratio

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / (self.warmup_steps + 1)
        if step < self.decay_start:
            return 1.0
        if step >= self.total_steps:
            return self.min_ratio
        u = (step - self.decay_start) / (self.total_steps - self.decay_start)
        return self.min_ratio + (1.0 - self.min_ratio) * decay_shape(self.shape, u)


#: how the files ``torch.save`` writes begin: a zip archive (PyTorch >= 1.6), or a pickle
TORCH_SAVE_STARTS = (b"PK\x03\x04", b"\x80")


def file_start(path: str) -> bytes | None:
    """The first bytes of ``path`` when it is a readable file, else None (a missing file or a
    directory is reported where the checkpoint is loaded)."""
    try:
        with open(path, "rb") as f:
            return f.read(16)
    except OSError:
        return None


@SCHEDULES.register("wsd")
@dataclass(frozen=True, kw_only=True)
class WSD(Warmup):
    """``scheduler=wsd``: warmup, stable at ``optim.lr``, then decay to ``min_lr`` over the last
    ``decay_fraction`` of ``trainer.max_steps``; ``decay_from``: a stable-phase checkpoint to branch
    from."""

    decay_fraction: float = 0.2
    decay_shape: Literal["linear", "cosine", "1-sqrt"] = "1-sqrt"
    min_lr: float = 0.0
    decay_from: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        f = self.decay_fraction
        if not is_number(f) or not 0 < f < 1:
            raise ConfigError(
                f"scheduler.decay_fraction={f!r} is invalid: the share of trainer.max_steps spent "
                "decaying, strictly between 0 and 1, e.g. scheduler.decay_fraction=0.2"
            )
        if self.decay_shape not in SHAPES:
            raise ConfigError(
                f"scheduler.decay_shape={self.decay_shape!r} is invalid: one of {', '.join(SHAPES)}"
            )
        if not is_number(self.min_lr) or self.min_lr < 0:
            raise ConfigError(
                f"scheduler.min_lr={self.min_lr!r} is invalid: the learning rate at the end of the "
                "decay, in [0, optim.lr], e.g. scheduler.min_lr=0"
            )
        if self.decay_from is not None and (
            not isinstance(self.decay_from, str) or not self.decay_from
        ):
            raise ConfigError(
                f"scheduler.decay_from={self.decay_from!r} is invalid: the path of a checkpoint of "
                "the stable phase, or null"
            )
        if self.decay_from is not None:
            start = file_start(self.decay_from)
            if start is not None and not start.startswith(TORCH_SAVE_STARTS):
                raise ConfigError(
                    f"scheduler.decay_from={self.decay_from} is not a checkpoint (a torch.save file "
                    f"starts with PK or \\x80; this one starts with {start[:16]!r}); give the "
                    "stable-phase checkpoint of the run to branch from (its checkpoints/*.ckpt), "
                    "or scheduler.decay_from=null"
                )

    def decay_start(self, max_steps: int) -> int:
        """``S``: the first step of the decay for a run of ``max_steps`` steps."""
        return max_steps - max(1, round(self.decay_fraction * max_steps))

    def check_run(self, lr: float, max_steps: int | None) -> None:
        if max_steps is None or max_steps <= 0:
            raise ConfigError(
                f"trainer.max_steps={max_steps!r} is invalid for scheduler=wsd: the decay is the "
                "last scheduler.decay_fraction of a fixed number of steps; set trainer.max_steps"
            )
        if self.min_lr > lr:
            raise ConfigError(f"scheduler.min_lr={self.min_lr!r} is invalid: in [0, optim.lr={lr}]")
        start = self.decay_start(max_steps)
        if start < self.warmup_steps:
            raise ConfigError(
                f"scheduler.warmup_steps={self.warmup_steps} is invalid with "
                f"scheduler.decay_fraction={self.decay_fraction} and "
                f"trainer.max_steps={max_steps}: the decay would start at step {start}, inside the "
                "warmup; lower one of them or raise trainer.max_steps"
            )

    def branch_checkpoint(self) -> str | None:
        return self.decay_from

    def check_branch(self, path: str, step: int, source: Mapping[str, Any], max_steps: int) -> None:
        """``decay_from``'s checkpoint (``path``, at optimiser step ``step``, trained with the run
        config ``source``) is on this run's stable phase: its own schedule had not begun to decay (a
        WSD run whose decay starts after ``step``, or a constant one) with this warmup, and ``step``
        is not past this run's decay start. The rest of "the same run" (model, data, optimiser) is
        the caller's."""
        node = source.get("scheduler") or {}
        name = node.get("name")
        if name not in ("wsd", "constant") or node.get("warmup_steps", 0) != self.warmup_steps:
            raise ConfigError(
                f"scheduler.decay_from={path} is not a stable-phase checkpoint of this schedule: "
                f"it was trained with scheduler={name} "
                f"(warmup_steps={node.get('warmup_steps', 0)}), not scheduler=wsd or constant with "
                f"scheduler.warmup_steps={self.warmup_steps}; branch from a checkpoint of a run "
                "with this warmup"
            )
        if name == "wsd":
            source_steps = (source.get("trainer") or {}).get("max_steps")
            fraction = node.get("decay_fraction", WSD.decay_fraction)
            source_start = WSD(warmup_steps=self.warmup_steps, decay_fraction=fraction).decay_start(
                source_steps
            )
            if step > source_start:
                raise ConfigError(
                    f"scheduler.decay_from={path} is past the stable phase: it was saved at step "
                    f"{step}, but its run (trainer.max_steps={source_steps}, "
                    f"scheduler.decay_fraction={fraction}) began to decay at step {source_start}; "
                    f"branch from a checkpoint saved at step {source_start} or earlier"
                )
        start = self.decay_start(max_steps)
        if step > start:
            raise ConfigError(
                f"scheduler.decay_from={path} is past the stable phase of this run: it was saved "
                f"at step {step}, but with trainer.max_steps={max_steps} and "
                f"scheduler.decay_fraction={self.decay_fraction} the decay starts at step {start}; "
                "raise trainer.max_steps to at least "
                f"{math.ceil(step / (1 - self.decay_fraction))} or lower scheduler.decay_fraction"
            )

    def build(
        self, optimizer: torch.optim.Optimizer, lr: float, max_steps: int | None
    ) -> LRScheduler:
        assert max_steps is not None  # check_run
        fn = WarmupStableDecay(
            self.warmup_steps,
            self.decay_start(max_steps),
            max_steps,
            self.decay_shape,
            float(self.min_lr) / lr,
        )
        return ScheduleLR(optimizer, fn)
