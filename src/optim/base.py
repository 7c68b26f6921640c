"""What every optimiser and schedule shares: the typed config base classes, their registries,
the weight-decay groups, and the plain node -> typed config parsing.

``optimizer_config(node)`` and ``schedule_config(node)`` turn the plain ``optim`` / ``scheduler``
node into a frozen, keyword-only dataclass picked by the node's ``name`` from ``OPTIMIZERS`` /
``SCHEDULES`` (one file per variant in this package, found on first lookup). The dataclass is the
one declaration of the group's keys (a key it has no field for is refused, listing the fields)
and checks its own values in ``__post_init__``; the run validation (``src.config.validate``)
calls ``check_pair`` once with the run's ``trainer.max_steps`` (the schedule's horizon and
``min_lr`` against ``optim.lr``, and the optimiser against the schedule: a schedule-free
optimiser refuses a schedule that also moves the learning rate). ``build(...)`` then makes the
PyTorch object without checking again. Every failure is a ``ConfigError`` naming the key, the
value and the fix.

Weight decay follows nanoGPT's rule (``configure_optimizers`` in karpathy/nanoGPT model.py):
every parameter with ``dim >= 2`` is decayed (the matrices of attention, FFN, head) and
everything else is not (biases, norm gains). Embedding tables are matrices but are *not*
decayed here (nanoGPT decays them; GPT-3 / many LLM recipes, and BERT's ``no_decay`` list
for norms, argue against shrinking rarely-updated rows): an ``nn.Embedding`` weight, and a
head tied to it, is in the no-decay group. ``optim.decay_embeddings=true`` restores nanoGPT.
Every optimiser here uses these groups (Muon for the hidden matrices and its AdamW for the rest).

Schedules are per optimiser step, so gradient accumulation does not stretch them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR, LRScheduler

from src.errors import ConfigError, check_keys, did_you_mean
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


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def check_betas(betas: Any, example: str = "[0.9,0.95]") -> tuple[float, float]:
    """``optim.betas``: two numbers in [0, 1) -> a tuple (a YAML list, once checked)."""
    b = betas
    if (
        not isinstance(b, (list, tuple))
        or len(b) != 2
        or not all(is_number(x) and 0 <= x < 1 for x in b)
    ):
        raise ConfigError(
            f"optim.betas={b!r} is invalid: two numbers in [0, 1), e.g. optim.betas={example}"
        )
    return float(b[0]), float(b[1])


def check_weight_decay(value: Any, key: str = "optim.weight_decay") -> None:
    if not is_number(value) or value < 0:
        raise ConfigError(f"{key}={value!r} is invalid: 0 or more, e.g. {key}=0.1")


# ---------------------------------------------------------------- optimisers


@dataclass(frozen=True, kw_only=True)
class OptimizerConfig:
    """What every ``optim=<name>`` has: ``lr`` (the schedules scale it). Subclasses add their
    fields, check them in ``__post_init__`` and build the optimiser.

    ``averages_weights``: the optimiser keeps two sets of weights and its ``train()``/``eval()``
    switch between them (schedule-free); ``callbacks()`` then gives the Lightning callback that
    applies the switch (``LMTask.configure_callbacks`` adds it)."""

    registry_name: ClassVar[str]
    averages_weights: ClassVar[bool] = False
    lr: float

    def __post_init__(self) -> None:
        if not is_number(self.lr) or self.lr <= 0:
            raise ConfigError(
                f"optim.lr={self.lr!r} is invalid: a positive learning rate, e.g. optim.lr=6e-4"
            )

    def check_schedule(self, schedule: Schedule, max_steps: int | None) -> None:
        """The optimiser against the run's schedule (``ConfigError`` naming both keys)."""

    def build(
        self, model: nn.Module, device: torch.device, clips_under_mixed_precision: bool = False
    ) -> torch.optim.Optimizer:
        raise NotImplementedError

    def callbacks(self) -> list[Any]:
        """Lightning callbacks the optimiser needs in every run that uses it."""
        return []


OPTIMIZERS: Registry[OptimizerConfig] = Registry("optimizer", conf="optim", package="src.optim")


def param_groups(
    model: nn.Module,
    weight_decay: float,
    decay_embeddings: bool = False,
    exclude: Iterable[nn.Parameter] = (),
    *,
    lr: float | None = None,
    rule: str = "adam",
) -> list[dict[str, Any]]:
    """Split trainable parameters into a decayed group (matrices) and a non-decayed one.

    Tied parameters (the head sharing the token embedding) are counted once. ``exclude``: parameters
    another optimiser takes (Muon's hidden matrices), left out of both groups.

    A model whose parametrization gives some parameters their own learning rate
    (``model.lr_multipliers(rule)``: μP, ``src/models/components/parametrization.py``) has those in
    further groups with ``lr`` = ``lr`` × multiplier and ``weight_decay`` / multiplier (PyTorch
    multiplies the decay by the rate: lr·wd stays the base width's); under ``sp`` the two groups
    above are all there is.
    """
    embedding_ids = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    seen: set[int] = {id(p) for p in exclude}
    for p in model.parameters():  # nn.Module.parameters() already yields a shared tensor once
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        is_embedding = id(p) in embedding_ids
        if p.dim() >= 2 and (decay_embeddings or not is_embedding):
            decay.append(p)
        else:
            no_decay.append(p)
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    multipliers_of = getattr(model, "lr_multipliers", None)
    multipliers = multipliers_of(rule) if multipliers_of is not None else {}
    return with_lr_multipliers(groups, multipliers, lr) if multipliers else groups


def with_lr_multipliers(
    groups: list[dict[str, Any]], multipliers: Mapping[int, float], lr: float | None
) -> list[dict[str, Any]]:
    """Each group split by learning-rate multiplier (``{id(param): multiplier}``; absent = 1): the
    multiplier-1 part keeps the group's settings, each other part gets ``lr`` × m and the group's
    ``weight_decay`` / m (``lr_mult`` records m)."""
    if lr is None:
        raise ValueError("param_groups needs lr= for a model with per-parameter learning rates")
    out: list[dict[str, Any]] = []
    for group in groups:
        by_mult: dict[float, list[nn.Parameter]] = {}
        for p in group["params"]:
            by_mult.setdefault(multipliers.get(id(p), 1.0), []).append(p)
        out.append({**group, "params": by_mult.pop(1.0, [])})
        for m in sorted(by_mult):
            wd = group["weight_decay"] / m
            out.append({"params": by_mult[m], "weight_decay": wd, "lr": lr * m, "lr_mult": m})
    return out


# ---------------------------------------------------------------- schedules


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """A learning-rate schedule (``scheduler=<name>``), per optimiser step. ``check_run`` holds
    the rules that need the run (``optim.lr``, ``trainer.max_steps``), called once by the run
    validation; ``build`` gives a ``LambdaLR`` (or None: the optimiser's lr throughout)."""

    registry_name: ClassVar[str]

    def check_run(self, lr: float, max_steps: int | None) -> None:
        """The schedule against the run; ``max_steps`` None or <= 0 means the run has no step
        horizon."""

    def moves_lr(self) -> bool:
        """Whether the schedule changes the learning rate during the run (warmup included)."""
        return True

    def describe(self) -> str:
        """The schedule as the user would set it, for messages (``scheduler=wsd``)."""
        return f"scheduler={self.registry_name}"

    def branch_checkpoint(self) -> str | None:
        """The checkpoint the run continues from as a branch of another run (WSD's ``decay_from``),
        or None."""
        return None

    def check_branch(self, path: str, step: int, source: Mapping[str, Any], max_steps: int) -> None:
        """``branch_checkpoint`` (saved at optimiser ``step`` by a run of config ``source``) against
        this run."""

    def build(
        self, optimizer: torch.optim.Optimizer, lr: float, max_steps: int | None
    ) -> LRScheduler | None:
        raise NotImplementedError


SCHEDULES: Registry[Schedule] = Registry("scheduler", conf="scheduler", package="src.optim")


class ScheduleLR(LambdaLR):
    """``LambdaLR`` whose multiplier is always the config's: a checkpoint restores the step
    (``last_epoch``) and the base learning rates, never the multiplier's settings. (A plain
    ``LambdaLR`` saves its callable's attributes and loads them back over the new ones, so a run
    resumed with a longer ``trainer.max_steps``, or a cooldown branch, would keep the old
    horizon.)"""

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["lr_lambdas"] = [None] * len(self.lr_lambdas)
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        # older checkpoints stored them: the config wins
        state["lr_lambdas"] = [None] * len(self.lr_lambdas)
        super().load_state_dict(state)


@dataclass(frozen=True, kw_only=True)
class Warmup(Schedule):
    """A schedule that starts with ``warmup_steps`` of linear warmup (``lr·(step+1)/(warmup+1)``,
    step counted from 0, as nanoGPT's ``get_lr``)."""

    warmup_steps: int = 0

    def __post_init__(self) -> None:
        if not is_count(self.warmup_steps) or self.warmup_steps < 0:
            raise ConfigError(
                f"scheduler.warmup_steps={self.warmup_steps!r} is invalid: a number of optimizer "
                "steps, 0 or more"
            )

    def describe(self) -> str:
        return f"scheduler={self.registry_name} (scheduler.warmup_steps={self.warmup_steps})"

    def warmup(self, step: int) -> float | None:
        """The warmup multiplier at ``step`` (None once warmup is over)."""
        return (step + 1) / (self.warmup_steps + 1) if step < self.warmup_steps else None


def check_pair(optimizer: OptimizerConfig, schedule: Schedule, max_steps: int | None) -> None:
    """The run's rules on its optimiser and schedule together (validated once, where the run is
    built)."""
    schedule.check_run(optimizer.lr, max_steps)
    optimizer.check_schedule(schedule, max_steps)


# ---------------------------------------------------------------- plain node -> typed config


def _parse(group: str, registry: Registry[C], node: Mapping[str, Any], default: str) -> C:
    """``node['name']`` (else ``default``) picks the class; every other key must be one of its
    fields."""
    node = dict(to_plain(node))
    name = node.pop("name", default)
    if not isinstance(name, str) or name not in registry:
        raise ConfigError(
            f"{group}.name={name!r} is not known{did_you_mean(str(name), registry.names())}; "
            f"registered: {', '.join(registry.in_order())}"
        )
    cls = registry.get(name)
    accepted = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    check_keys(node, accepted, where=f"{group}={name}", prefix=f"{group}.")
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if (
            f.name not in node
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ):
            raise ConfigError(
                f"{group}.{f.name} is missing: {group}={name} has no default for it; set "
                f"{group}.{f.name}=<value>"
            )
    return cls(**node)


def optimizer_config(node: Mapping[str, Any]) -> OptimizerConfig:
    """The plain ``optim`` node -> its typed, checked config (``name`` defaults to ``adamw``)."""
    return _parse("optim", OPTIMIZERS, node, "adamw")


def schedule_config(node: Mapping[str, Any]) -> Schedule:
    """The plain ``scheduler`` node -> its typed, checked config (``name`` defaults to ``none``).
    The rules that need the run are ``check_pair``'s."""
    return _parse("scheduler", SCHEDULES, node, "none")
