"""``validate_run_config(cfg)``: every check that needs only the composed config, in one place.

Called by ``src.training.setup.build_run`` before any tokenizer, data or model is built, so a
mistyped or impossible run fails in a second, inside the run's try block (a sweep job records
the error in its ``metrics.json``). Each failure names the key, the value and the fix.

Checks, in order (the first failure is raised):

1. no ``trust_remote_code: true`` anywhere; no mandatory value (``???``) left unset;
2. keys, as the code declares them (no YAML file is read): top-level keys are ``RUN_KEYS`` (Hydra's
   struct mode already rejects ``key=v`` typos; this also catches ``+key=v``), ``objective`` keys the
   objective's ``options``, ``tokenizer`` keys its constructor's (``optim``/``scheduler`` keys are
   the fields of their dataclass in ``src.optim``, checked in 4);
3. model (3 and 4 in ``src.config.part_checks``): the validated ``ModelConfig``
   (``ModelConfig.from_dict``: numbers, each component's own ``check_args``, registered names and
   accepted keys, the family), made once and returned;
4. task and data: the task is registered and fits the model family and the data's batch format
   (translation pairs on an encoder-only model …); the data node is its source's
   (``src.data.sources.check_source``); ``block_size`` fits a learned position table; the
   optimiser and schedule typed by ``src.optim`` (names, keys, values, the cosine horizon);
5. trainer (``src.config.trainer_checks``): argument names, accelerator / strategy / devices /
   precision against the hardware (FSDP on CPU, more GPUs than visible, fp16 on CPU, bf16 on a GPU
   without it), callbacks that need a logger, callback/logger keys against their classes,
   ``ckpt_path`` exists, ``reliability`` and ``resume`` keys and values.

Checks that need built objects stay where the objects are: the tokenizer's vocabulary against
``model.vocab_size`` (``src.config.spec.resolve``), data files and their contents
(``src.data``), a checkpoint against the model (``src.checkpoints.fit``).
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from src.checkpoints.fit import allow_list
from src.checkpoints.io import checkpoint_file, is_sharded
from src.config.inherited import drop_inherited
from src.config.part_checks import check_model, check_optimisation, check_task_and_data
from src.config.size_bounds import Memory
from src.config.spec import RunSpec, freeze
from src.config.trainer_checks import Hardware, check_trainer, positive_int
from src.errors import ConfigError, check_keys
from src.models.matching import MatchParams
from src.plain import to_plain

#: the top-level keys of a run config: the groups and values that src.train reads (conf/train.yaml
#: gives each its default; tests/config/test_error_catalogue.py checks the two agree)
RUN_KEYS = frozenset(
    {
        "model",
        "tokenizer",
        "data",
        "objective",
        "trainer",
        "optim",
        "scheduler",
        "logger",
        "callbacks",
        "reliability",
        "paths",
        "seed",
        "deterministic",
        "tf32",
        "batch_size",
        "block_size",
        "num_workers",
        "vocab_size_from",
        "compile",
        "cpu_threads",
        "ckpt_path",
        "resume",
        "init_from",
        "test",
        "optimized_metric",
        "match_params",
        "protocol",
        "report",
        "sweep_resume",
    }
)
NONFINITE_ACTIONS = ("stop", "skip")
#: the ``reliability.*`` keys ``src.training.harden.harden_trainer`` reads (the non-finite guard's
#: settings)
RELIABILITY_KEYS = (
    "nonfinite",
    "check_every_n_steps",
    "max_consecutive_skips",
    "abandon_step_after_s",
)
LIGHTNING_CKPT_ALIASES = ("last", "best", "hpc", "registry")


def validate_run_config(
    cfg: Any,
    *,
    hardware: Hardware | None = None,
    inherited: Iterable[str] = (),
    memory: Memory | None = None,
) -> RunSpec:
    """Check a composed run config (DictConfig or plain dict) once; return it as a ``RunSpec``
    (src/config/spec.py), frozen. ``inherited``: keys an experiment set and the command line did
    not; one the chosen variant of its group does not take is left out, not refused
    (src/config/inherited.py). ``memory``: what sizes are checked against (default: this
    machine's, ``src.config.size_bounds``).

    Raises ``ConfigError`` (for the model's numbers, component names and the task too), or
    ``DataError`` for the data node, each with a message naming key, value and fix.
    """
    plain = to_plain(cfg)
    drop_inherited(plain, set(inherited))
    _check_no_remote_code(plain)
    _check_no_missing(plain)
    _check_top_keys(plain)
    _check_group_keys(plain)
    model = check_model(plain["model"])
    data = check_task_and_data(plain, model, memory)
    optimizer, schedule = check_optimisation(plain)
    # checked here; solved by spec.resolve, which knows the tokenizer's vocabulary
    match_params = MatchParams.from_config(plain)
    check_trainer(plain, hardware or Hardware.detect())
    _check_callbacks(plain)
    _check_run_keys(plain)
    return RunSpec(
        plain=freeze(plain),
        model=model,
        objective=plain["objective"]["name"],
        data=data,
        optimizer=optimizer,
        schedule=schedule,
        match_params=match_params,
    )


# ---------------------------------------------------------------- helpers


def _walk(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of every leaf and inner node."""
    if isinstance(node, Mapping):
        for k, v in node.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            yield key, v
            yield from _walk(v, key)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, f"{prefix}[{i}]")


# ---------------------------------------------------------------- 1. safety and completeness


def _check_no_remote_code(plain: Mapping[str, Any]) -> None:
    for key, value in _walk(plain):
        if key.rsplit(".", 1)[-1] == "trust_remote_code" and value:
            raise ConfigError(
                f"{key}={value!r}: remote code from the Hub is never run here; remove the key "
                "(loading uses trust_remote_code=False) and use a model/tokenizer/dataset that "
                "ships plain config and weights"
            )


def _check_no_missing(plain: Mapping[str, Any]) -> None:
    for key, value in _walk(plain):
        if value == "???":
            raise ConfigError(
                f"{key}={value!r} is invalid: it is required and has no default; pass "
                f"{key}=<value> on the command line"
            )


# ---------------------------------------------------------------- 2. keys


def _check_top_keys(plain: Mapping[str, Any]) -> None:
    """Top-level keys against ``RUN_KEYS`` (Hydra's struct mode refuses ``key=v`` for an unknown
    key; a ``+key=v`` would add a key that nothing reads)."""
    check_keys(plain, sorted(RUN_KEYS), where="the run config")


def _check_group_keys(plain: Mapping[str, Any]) -> None:
    """``objective.*`` and ``tokenizer.*`` keys against what their code declares: the objective's
    ``options``, the tokenizer's constructor (an unknown name is left to the checks that follow)."""
    from src.data.tokenizers import TOKENIZERS
    from src.objectives import OBJECTIVES

    for group, registry in (("objective", OBJECTIVES), ("tokenizer", TOKENIZERS)):
        node = plain.get(group)
        if not isinstance(node, Mapping) or node.get("name") not in registry:
            continue
        # an objective declares its objective.* keys
        own = getattr(registry.get(node["name"]), "options", None)
        accepted = ["name", *(own if own is not None else registry.accepted_keys(node["name"]))]
        check_keys(node, accepted, where=f"{group}={node['name']}", prefix=f"{group}.")


# ---------------------------------------------------------------- 5. trainer, callbacks, run keys


def _check_callbacks(plain: Mapping[str, Any]) -> None:
    from hydra.utils import get_object

    loggers = {k: v for k, v in (plain.get("logger") or {}).items() if v}
    for group in ("callbacks", "logger"):
        for name, node in (plain.get(group) or {}).items():
            if not isinstance(node, Mapping) or "_target_" not in node:
                continue
            try:
                target = get_object(node["_target_"])
            except Exception as e:  # ImportError / AttributeError, wrapped by Hydra
                reason = str(e).splitlines()[0]
                raise ConfigError(
                    f"{group}.{name}._target_={node['_target_']!r} is invalid: it cannot be "
                    f"imported ({reason}); give a dotted path to a class"
                ) from None
            _check_target_kind(group, name, node, target)
            if (
                group == "callbacks"
                and not loggers
                and getattr(target, "__name__", "") == "LearningRateMonitor"
            ):
                raise ConfigError(
                    f"callbacks.{name} ({node['_target_']}) needs a logger, but logger=none "
                    "configures none; choose logger=csv, or drop the callback with "
                    f"~callbacks.{name}"
                )
            _check_target_keys(f"{group}.{name}", node, target)


def _check_target_kind(group: str, name: str, node: Mapping[str, Any], target: Any) -> None:
    """A callback's ``_target_`` is a Lightning ``Callback`` class, a logger's a ``Logger`` class or
    a factory of this project (``src.training.loggers.mlflow_logger``), and neither builds an
    argument from a nested ``_target_``: checked here, before anything is instantiated, since a
    saved run config reused with ``--config-path <run>/.hydra`` is input like any other (``_target_:
    shutil.rmtree`` would run when built)."""
    from lightning.pytorch import Callback
    from lightning.pytorch.loggers import Logger

    base = Callback if group == "callbacks" else Logger
    ours = (
        callable(target)
        and str(getattr(target, "__module__", "")).split(".")[0] == "src"
        and group == "logger"
    )
    if not (isinstance(target, type) and issubclass(target, base)) and not ours:
        raise ConfigError(
            f"{group}.{name}._target_={node['_target_']!r} is not a Lightning {base.__name__} "
            f"class (it is {type(target).__name__} {getattr(target, '__qualname__', target)!s}); "
            f"nothing was built. Give a {base.__module__.split('.')[0]}.pytorch {base.__name__} "
            f"subclass, or drop it with ~{group}.{name}"
        )
    for key, value in _walk(dict(node)):
        if key.split(".")[-1] == "_target_" and "." in key:
            raise ConfigError(
                f"{group}.{name}.{key}={value!r}: a "
                f"{group[:-1] if group == 'callbacks' else group} argument built from a nested "
                "_target_ is not accepted; give the argument's value, or remove "
                f"{group}.{name}.{key.rsplit('.', 1)[0]}"
            )


def _check_target_keys(key: str, node: Mapping[str, Any], target: Any) -> None:
    """Keys of a ``_target_`` node against the target's arguments (``+logger.csv.nme=x`` would end
    in a bare ``TypeError`` when it is instantiated); a target taking ``**kwargs`` accepts
    anything."""
    try:
        params = inspect.signature(target).parameters
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check against
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    own = {k: v for k, v in node.items() if not str(k).startswith("_")}
    check_keys(own, params, where=node["_target_"], prefix=f"{key}.")


def _check_run_keys(plain: Mapping[str, Any]) -> None:
    allow_list(plain)  # CheckpointError: resume.allow_config_change=model (not a list)
    rel = dict(plain.get("reliability") or {})
    for node, where, accepted in (
        ("reliability", "conf/reliability/default.yaml", RELIABILITY_KEYS),
        ("resume", "conf/train.yaml", ("allow_config_change",)),
    ):
        check_keys(plain.get(node) or {}, accepted, where=where, prefix=f"{node}.")
    action = rel.get("nonfinite", "stop")
    if action not in NONFINITE_ACTIONS:
        raise ConfigError(
            f"reliability.nonfinite={action!r} is invalid: use stop (end the run, keep the last "
            "good checkpoint) or skip (drop that update)"
        )
    for key in ("check_every_n_steps", "max_consecutive_skips"):
        if key in rel:
            positive_int(f"reliability.{key}", rel[key], "a positive number of steps")
    abandon = rel.get("abandon_step_after_s")
    if abandon is not None and (
        isinstance(abandon, bool)
        or not isinstance(abandon, int | float)
        or not math.isfinite(abandon)
        or abandon < 0
    ):
        raise ConfigError(
            f"reliability.abandon_step_after_s={abandon!r} is invalid: use seconds >= 0 (a step "
            "at least this slow is abandoned on SIGTERM) or null (always finish the step)"
        )
    ckpt = plain.get("ckpt_path")
    if ckpt and str(ckpt) not in LIGHTNING_CKPT_ALIASES and "://" not in str(ckpt):
        path = Path(os.path.expanduser(str(ckpt)))
        if path.is_dir():
            checkpoint_file(path)  # CheckpointError: a directory, naming the .ckpt files in it
        if not (path.is_file() or is_sharded(path)):  # trainer=fsdp2's sharded directory
            raise ConfigError(
                f"ckpt_path={ckpt}: no such file; resume from <run dir>/checkpoints/last.ckpt of "
                "an earlier run, or set ckpt_path=null to start fresh"
            )
        tp = (plain.get("trainer") or {}).get("tensor_parallel", 1)
        if is_sharded(path) and isinstance(tp, int) and tp > 1:
            raise ConfigError(
                f"ckpt_path={ckpt} is a sharded checkpoint, which trainer.tensor_parallel={tp} "
                "cannot reshard (its fused qkv is split by heads, not in the contiguous chunks "
                "the shards record); resume it with trainer.tensor_parallel=1, or resume a "
                "tensor-parallel run from a full checkpoint (trainer.strategy.state_dict_type=full)"
            )
    init = plain.get("init_from")
    if init:
        from src.checkpoints.load import check_init_from

        check_init_from(init, ckpt)  # CheckpointError: both set
        checkpoint_file(init)  # CheckpointError: missing, or a directory
