"""Optimiser and learning-rate schedules, built from plain config (``optim=…``, ``scheduler=…``).

Weight decay follows nanoGPT's rule (``configure_optimizers`` in karpathy/nanoGPT model.py):
every parameter with ``dim >= 2`` is decayed (the matrices of attention, FFN, head) and
everything else is not (biases, norm gains). Embedding tables are matrices but are *not*
decayed here (nanoGPT decays them; GPT-3 / many LLM recipes, and BERT's ``no_decay`` list
for norms, argue against shrinking rarely-updated rows): an ``nn.Embedding`` weight, and a
head tied to it, is in the no-decay group. ``optim.decay_embeddings=true`` restores nanoGPT.

Schedules (all per optimiser step, so gradient accumulation does not stretch them):

* ``cosine`` — linear warmup, then cosine decay from ``lr`` to ``min_lr`` at ``decay_steps``,
  constant after (nanoGPT's ``get_lr``, step ``it`` counted from 0: ``lr·(it+1)/(warmup+1)``).
* ``constant`` — linear warmup, then ``lr``.
* ``none`` — ``lr`` from the first step.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

OPTIMIZERS = ("adamw",)
SCHEDULERS = ("cosine", "constant", "none")
FUSED = ("auto", True, False)


def fused_devices() -> tuple[str, ...]:
    """Device types with a fused ``torch.optim.AdamW`` kernel (CUDA; CPU since PyTorch 2.4; …)."""
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

        return tuple(_get_fused_kernels_supported_devices())
    except ImportError:  # pragma: no cover - older PyTorch
        return ("cuda",)


class OptimConfigError(ValueError):
    """An ``optim`` / ``scheduler`` value of the wrong type or out of range: key, value and fix."""

    @classmethod
    def bad(cls, key: str, value: Any, fix: str) -> "OptimConfigError":
        return cls(f"{key}={value!r} is invalid: {fix}")

    @classmethod
    def unknown(cls, key: str, value: Any, names: tuple[str, ...]) -> "OptimConfigError":
        return cls(f"{key}={value!r} is not known; registered: {', '.join(names)}")


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def check_optim(cfg: Mapping[str, Any]) -> None:
    """Every ``optim`` value's type and range (``OptimConfigError`` naming key, value and fix)."""
    name = cfg.get("name", "adamw")
    if name not in OPTIMIZERS:
        raise OptimConfigError.unknown("optim.name", name, OPTIMIZERS)
    lr = cfg.get("lr")
    if not _number(lr) or lr <= 0:
        raise OptimConfigError.bad("optim.lr", lr, "a positive learning rate, e.g. optim.lr=6e-4")
    betas = cfg.get("betas", (0.9, 0.999))
    if (not isinstance(betas, (list, tuple)) or len(betas) != 2
            or not all(_number(b) and 0 <= b < 1 for b in betas)):
        raise OptimConfigError.bad("optim.betas", betas, "two numbers in [0, 1), e.g. optim.betas=[0.9,0.95]")
    eps = cfg.get("eps", 1e-8)
    if not _number(eps) or eps <= 0:
        raise OptimConfigError.bad("optim.eps", eps, "a small positive number, e.g. optim.eps=1e-8")
    wd = cfg.get("weight_decay", 0.0)
    if not _number(wd) or wd < 0:
        raise OptimConfigError.bad("optim.weight_decay", wd, "0 or more, e.g. optim.weight_decay=0.1")
    if not isinstance(cfg.get("decay_embeddings", False), bool):
        raise OptimConfigError.bad("optim.decay_embeddings", cfg.get("decay_embeddings"), "true or false")
    if cfg.get("fused", "auto") not in FUSED:
        raise OptimConfigError.bad("optim.fused", cfg.get("fused"),
                                   "auto (the fused kernel where PyTorch has one: CUDA, CPU), true or false")


def check_scheduler(cfg: Mapping[str, Any], lr: float, max_steps: int | None) -> None:
    """Every ``scheduler`` value's type and range, and a horizon for ``cosine`` (``OptimConfigError``)."""
    name = cfg.get("name", "none")
    if name not in SCHEDULERS:
        raise OptimConfigError.unknown("scheduler.name", name, SCHEDULERS)
    warmup = cfg.get("warmup_steps", 0)
    if not _count(warmup) or warmup < 0:
        raise OptimConfigError.bad("scheduler.warmup_steps", warmup, "a number of optimizer steps, 0 or more")
    if name != "cosine":
        return
    decay = cfg.get("decay_steps")
    if decay is not None and (not _count(decay) or decay < 1):
        raise OptimConfigError.bad("scheduler.decay_steps", decay,
                               "a positive number of optimizer steps, or null (= trainer.max_steps)")
    if decay is None and (max_steps is None or max_steps <= 0):
        raise OptimConfigError.bad("scheduler.decay_steps", decay,
                               "scheduler=cosine needs a horizon: set scheduler.decay_steps, or trainer.max_steps "
                               "(it defaults to it)")
    min_lr = cfg.get("min_lr")
    if min_lr is not None and (not _number(min_lr) or not 0 <= min_lr <= lr):
        raise OptimConfigError.bad("scheduler.min_lr", min_lr, f"in [0, optim.lr={lr}], or null (= optim.lr / 10)")


def param_groups(model: nn.Module, weight_decay: float, decay_embeddings: bool = False) -> list[dict[str, Any]]:
    """Split trainable parameters into a decayed group (matrices) and a non-decayed one.

    Tied parameters (the head sharing the token embedding) are counted once.
    """
    embedding_ids = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    seen: set[int] = set()
    for p in model.parameters():  # nn.Module.parameters() already yields a shared tensor once
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        is_embedding = id(p) in embedding_ids
        if p.dim() >= 2 and (decay_embeddings or not is_embedding):
            decay.append(p)
        else:
            no_decay.append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def build_optimizer(model: nn.Module, cfg: Mapping[str, Any], device: torch.device,
                    clips_under_mixed_precision: bool = False) -> torch.optim.Optimizer:
    """``optim`` config -> optimiser. ``fused: auto`` uses PyTorch's fused AdamW kernel on every device
    that has one (CUDA, and CPU since PyTorch 2.4: one kernel over all parameters instead of ~10 small
    ops per tensor), except when ``clips_under_mixed_precision``: Lightning's mixed-precision plugin
    (``trainer.precision=bf16-mixed``/``16-mixed``) refuses to clip gradients for an optimizer that
    unscales them inside its step, which a fused AdamW does; ``auto`` then takes the per-tensor loop
    and ``fused: true`` is an error naming the keys."""
    check_optim(cfg)
    fused = cfg.get("fused", "auto")
    if fused == "auto":
        fused = device.type in fused_devices() and not clips_under_mixed_precision
    if fused and device.type not in fused_devices():
        raise ValueError(f"optim.fused=true needs a device with PyTorch's fused AdamW ({', '.join(fused_devices())}), "
                         f"but the model is on {device}; set optim.fused=auto")
    if fused and clips_under_mixed_precision:
        raise ValueError("optim.fused=true cannot be combined with gradient clipping under mixed precision "
                         "(trainer.gradient_clip_val with trainer.precision=bf16-mixed or 16-mixed): Lightning refuses to "
                         "clip the gradients of an optimizer that unscales them itself; set optim.fused=auto or "
                         "trainer.gradient_clip_val=null")
    groups = param_groups(model, float(cfg["weight_decay"]), bool(cfg.get("decay_embeddings", False)))
    return torch.optim.AdamW(
        groups,
        lr=float(cfg["lr"]),
        betas=tuple(float(b) for b in cfg["betas"]),  # type: ignore[arg-type]
        eps=float(cfg.get("eps", 1e-8)),
        fused=bool(fused),
    )


class WarmupCosine:
    """LR multiplier for ``LambdaLR``: linear warmup, cosine to ``min_ratio``, then flat.

    A class (not a closure) so that ``LambdaLR.state_dict()`` stores its plain attributes.
    """

    def __init__(self, warmup_steps: int, decay_steps: int | None, min_ratio: float, cosine: bool = True) -> None:
        self.warmup_steps = int(warmup_steps)
        self.decay_steps = int(decay_steps) if decay_steps is not None else None
        self.min_ratio = float(min_ratio)
        self.cosine = bool(cosine)

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / (self.warmup_steps + 1)
        if not self.cosine:
            return 1.0
        assert self.decay_steps is not None
        if step > self.decay_steps:
            return self.min_ratio
        span = max(1, self.decay_steps - self.warmup_steps)
        coeff = 0.5 * (1.0 + math.cos(math.pi * (step - self.warmup_steps) / span))  # 1 -> 0
        return self.min_ratio + coeff * (1.0 - self.min_ratio)


def build_scheduler(
    optimizer: torch.optim.Optimizer, cfg: Mapping[str, Any], lr: float, max_steps: int | None
) -> torch.optim.lr_scheduler.LRScheduler | None:
    """``scheduler`` config -> a per-step ``LambdaLR`` (or ``None`` for ``scheduler=none``)."""
    check_scheduler(cfg, lr, max_steps)
    name = cfg.get("name", "none")
    if name == "none":
        return None
    warmup = int(cfg.get("warmup_steps", 0))
    if name == "constant":
        fn = WarmupCosine(warmup, None, 1.0, cosine=False)
    else:
        decay_steps = cfg.get("decay_steps")
        if decay_steps is None:
            decay_steps = max_steps
        min_lr = cfg.get("min_lr")
        min_ratio = 0.1 if min_lr is None else float(min_lr) / lr
        fn = WarmupCosine(warmup, int(decay_steps), min_ratio)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, fn)
