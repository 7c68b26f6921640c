"""Optimiser and learning-rate schedules: one typed config per variant, validated once.

``optimizer_config(node)`` and ``schedule_config(node)`` turn the plain ``optim`` / ``scheduler``
node into a frozen, keyword-only dataclass picked by the node's ``name`` from ``OPTIMIZERS`` /
``SCHEDULES``. The dataclass is the one declaration of the group's keys (a key it has no field
for is refused, listing the fields) and checks its own values in ``__post_init__``; the run
validation (``src.config.validate``) calls the schedule's ``check_run`` once with ``optim.lr``
and ``trainer.max_steps``. ``build(...)`` then makes the PyTorch object without checking again.
Every failure is a ``ConfigError`` naming the key, the value and the fix.

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

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR, LRScheduler

from src.errors import ConfigError, did_you_mean
from src.plain import to_plain
from src.registry import Registry

C = TypeVar("C")


def fused_devices() -> tuple[str, ...]:
    """Device types with a fused ``torch.optim.AdamW`` kernel (CUDA; CPU since PyTorch 2.4; …)."""
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

        return tuple(_get_fused_kernels_supported_devices())
    except ImportError:  # pragma: no cover - older PyTorch
        return ("cuda",)


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


# ---------------------------------------------------------------- optimisers


@dataclass(frozen=True, kw_only=True)
class OptimizerConfig:
    """What every ``optim=<name>`` has: ``lr`` (the schedules scale it). Subclasses add their
    fields, check them in ``__post_init__`` and build the optimiser."""

    registry_name: ClassVar[str]
    lr: float

    def __post_init__(self) -> None:
        if not _number(self.lr) or self.lr <= 0:
            raise ConfigError(f"optim.lr={self.lr!r} is invalid: a positive learning rate, e.g. optim.lr=6e-4")

    def build(self, model: nn.Module, device: torch.device,
              clips_under_mixed_precision: bool = False) -> torch.optim.Optimizer:
        raise NotImplementedError


OPTIMIZERS: Registry[OptimizerConfig] = Registry("optimizer", conf="optim")


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


@OPTIMIZERS.register("adamw")
@dataclass(frozen=True, kw_only=True)
class AdamW(OptimizerConfig):
    """``optim=adamw``: AdamW (Loshchilov & Hutter 2019, arXiv:1711.05101) with nanoGPT's decay
    groups (``param_groups``). ``fused``: ``auto`` takes PyTorch's fused kernel where it has one."""

    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    decay_embeddings: bool = False
    fused: Literal["auto", True, False] = "auto"

    def __post_init__(self) -> None:
        super().__post_init__()
        b = self.betas
        if not isinstance(b, (list, tuple)) or len(b) != 2 or not all(_number(x) and 0 <= x < 1 for x in b):
            raise ConfigError(f"optim.betas={b!r} is invalid: two numbers in [0, 1), e.g. optim.betas=[0.9,0.95]")
        object.__setattr__(self, "betas", tuple(b))  # a YAML list, once checked (frozen: the dataclass idiom)
        if not _number(self.eps) or self.eps <= 0:
            raise ConfigError(f"optim.eps={self.eps!r} is invalid: a small positive number, e.g. optim.eps=1e-8")
        if not _number(self.weight_decay) or self.weight_decay < 0:
            raise ConfigError(f"optim.weight_decay={self.weight_decay!r} is invalid: 0 or more, e.g. "
                              "optim.weight_decay=0.1")
        if not isinstance(self.decay_embeddings, bool):
            raise ConfigError(f"optim.decay_embeddings={self.decay_embeddings!r} is invalid: true or false")
        if not (isinstance(self.fused, bool) or self.fused == "auto"):  # not `in (…)`: 1 == True
            raise ConfigError(f"optim.fused={self.fused!r} is invalid: auto (the fused kernel where PyTorch has one: "
                              "CUDA, CPU), true or false")

    def build(self, model: nn.Module, device: torch.device,
              clips_under_mixed_precision: bool = False) -> torch.optim.Optimizer:
        """``fused: auto`` uses PyTorch's fused AdamW kernel on every device that has one (CUDA, and
        CPU since PyTorch 2.4: one kernel over all parameters instead of ~10 small ops per tensor),
        except when ``clips_under_mixed_precision``: Lightning's mixed-precision plugin
        (``trainer.precision=bf16-mixed``/``16-mixed``) refuses to clip gradients for an optimizer
        that unscales them inside its step, which a fused AdamW does; ``auto`` then takes the
        per-tensor loop and ``fused: true`` is an error naming the keys."""
        fused = self.fused
        if fused == "auto":
            fused = device.type in fused_devices() and not clips_under_mixed_precision
        if fused and device.type not in fused_devices():
            raise ConfigError(f"optim.fused=true needs a device with PyTorch's fused AdamW "
                              f"({', '.join(fused_devices())}), but the model is on {device}; set optim.fused=auto")
        if fused and clips_under_mixed_precision:
            raise ConfigError("optim.fused=true cannot be combined with gradient clipping under mixed precision "
                              "(trainer.gradient_clip_val with trainer.precision=bf16-mixed or 16-mixed): Lightning "
                              "refuses to clip the gradients of an optimizer that unscales them itself; set "
                              "optim.fused=auto or trainer.gradient_clip_val=null")
        groups = param_groups(model, float(self.weight_decay), self.decay_embeddings)
        return torch.optim.AdamW(groups, lr=float(self.lr), betas=(float(self.betas[0]), float(self.betas[1])),
                                 eps=float(self.eps), fused=bool(fused))


# ---------------------------------------------------------------- schedules


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


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """A learning-rate schedule (``scheduler=<name>``), per optimiser step. ``check_run`` holds
    the rules that need the run (``optim.lr``, ``trainer.max_steps``), called once by the run
    validation; ``build`` gives a ``LambdaLR`` (or None: the optimiser's lr throughout)."""

    registry_name: ClassVar[str]

    def check_run(self, lr: float, max_steps: int | None) -> None:
        """The schedule against the run; ``max_steps`` None or <= 0 means the run has no step horizon."""

    def build(self, optimizer: torch.optim.Optimizer, lr: float, max_steps: int | None) -> LRScheduler | None:
        raise NotImplementedError


SCHEDULES: Registry[Schedule] = Registry("scheduler", conf="scheduler")


@dataclass(frozen=True, kw_only=True)
class _Warmup(Schedule):
    """A schedule that starts with ``warmup_steps`` of linear warmup."""

    warmup_steps: int = 0

    def __post_init__(self) -> None:
        if not _count(self.warmup_steps) or self.warmup_steps < 0:
            raise ConfigError(f"scheduler.warmup_steps={self.warmup_steps!r} is invalid: a number of optimizer "
                              "steps, 0 or more")


@SCHEDULES.register("cosine")
@dataclass(frozen=True, kw_only=True)
class Cosine(_Warmup):
    """``scheduler=cosine``: warmup, cosine decay to ``min_lr`` (null = lr/10) at ``decay_steps``
    (null = ``trainer.max_steps``), flat after: nanoGPT's ``get_lr``."""

    decay_steps: int | None = None
    min_lr: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        d = self.decay_steps
        if d is not None and (not _count(d) or d < 1):
            raise ConfigError(f"scheduler.decay_steps={d!r} is invalid: a positive number of optimizer steps, or "
                              "null (= trainer.max_steps)")
        if self.min_lr is not None and (not _number(self.min_lr) or self.min_lr < 0):
            raise ConfigError(f"scheduler.min_lr={self.min_lr!r} is invalid: in [0, optim.lr], or null "
                              "(= optim.lr / 10)")

    def check_run(self, lr: float, max_steps: int | None) -> None:
        if self.decay_steps is None and (max_steps is None or max_steps <= 0):
            raise ConfigError(f"scheduler.decay_steps={self.decay_steps!r} is invalid: scheduler=cosine needs a "
                              "horizon: set scheduler.decay_steps, or trainer.max_steps (it defaults to it)")
        if self.min_lr is not None and self.min_lr > lr:
            raise ConfigError(f"scheduler.min_lr={self.min_lr!r} is invalid: in [0, optim.lr={lr}], or null "
                              "(= optim.lr / 10)")

    def build(self, optimizer: torch.optim.Optimizer, lr: float, max_steps: int | None) -> LRScheduler:
        decay_steps = self.decay_steps if self.decay_steps is not None else max_steps
        min_ratio = 0.1 if self.min_lr is None else float(self.min_lr) / lr
        return LambdaLR(optimizer, WarmupCosine(self.warmup_steps, decay_steps, min_ratio))


@SCHEDULES.register("constant")
@dataclass(frozen=True, kw_only=True)
class Constant(_Warmup):
    """``scheduler=constant``: warmup, then ``optim.lr``."""

    def build(self, optimizer: torch.optim.Optimizer, lr: float, max_steps: int | None) -> LRScheduler:
        return LambdaLR(optimizer, WarmupCosine(self.warmup_steps, None, 1.0, cosine=False))


@SCHEDULES.register("none")
@dataclass(frozen=True, kw_only=True)
class NoSchedule(Schedule):
    """``scheduler=none``: ``optim.lr`` from the first step."""

    def build(self, optimizer: torch.optim.Optimizer, lr: float, max_steps: int | None) -> None:
        return None


# ---------------------------------------------------------------- plain node -> typed config


def _parse(group: str, registry: Registry[C], node: Mapping[str, Any], default: str) -> C:
    """``node['name']`` (else ``default``) picks the class; every other key must be one of its fields."""
    node = dict(to_plain(node))
    name = node.pop("name", default)
    if not isinstance(name, str) or name not in registry:
        raise ConfigError(f"{group}.name={name!r} is not known{did_you_mean(str(name), registry.names())}; registered: "
                          f"{', '.join(registry.in_order())}")
    cls = registry.get(name)
    accepted = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    for key, value in node.items():
        if key not in accepted:
            raise ConfigError(f"{group}.{key}={value!r} is not a key of {group}={name}"
                              f"{did_you_mean(key, accepted, f'{group}.')} (accepted: "
                              f"{', '.join(accepted) or 'name only'}); fix the spelling or remove the override")
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name not in node and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{group}.{f.name} is missing: {group}={name} has no default for it; set "
                              f"{group}.{f.name}=<value>")
    return cls(**node)


def optimizer_config(node: Mapping[str, Any]) -> OptimizerConfig:
    """The plain ``optim`` node -> its typed, checked config (``name`` defaults to ``adamw``)."""
    return _parse("optim", OPTIMIZERS, node, "adamw")


def schedule_config(node: Mapping[str, Any]) -> Schedule:
    """The plain ``scheduler`` node -> its typed, checked config (``name`` defaults to ``none``).
    The rules that need the run are ``Schedule.check_run``'s."""
    return _parse("scheduler", SCHEDULES, node, "none")
