"""What a run trains and how, checked for ``validate_run_config`` (src/config/validate.py): the
model, the task against the model family and the data, the training window, the optimiser and
schedule (with a branch checkpoint), the top-level run values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from src.checkpoints.fit import run_differences
from src.checkpoints.io import checkpoint_file, safe_torch_load
from src.config import size_bounds
from src.config.document_mask import check_document_mask
from src.config.size_bounds import Memory
from src.config.spec import TOKENIZER_KEYS, DataSpec, freeze
from src.config.trainer_checks import checked_max_steps, fail, positive_int
from src.errors import ConfigError, did_you_mean
from src.models.config import ModelConfig
from src.optim import OptimizerConfig, Schedule, check_pair, optimizer_config, schedule_config

# ---------------------------------------------------------------- 3. model


def check_model(model: Mapping[str, Any]) -> ModelConfig:
    """The validated ModelConfig (its numbers, each component's own checks, the family), made once
    without building anything; a ConfigError names the key and the fix."""
    return ModelConfig.from_dict(model)


# ---------------------------------------------------------------- 4. task, data, names


def check_task_and_data(
    plain: dict[str, Any], model: Any, memory: Memory | None = None
) -> DataSpec:
    """The task fits the model and the data (cross-group); the data node is its source's; the
    training window fits a learned position table (data x model); every size fits ``memory``
    (``src.config.size_bounds``; default: this machine's). Returns the data's spec."""
    from src.data.sources import BATCH_FORMATS, check_source, split_config
    from src.models.components.positions import POSITIONS, LearnedPosition
    from src.models.families import FAMILIES
    from src.objectives import OBJECTIVES

    task_name = (plain.get("objective") or {}).get("name")
    if task_name not in OBJECTIVES:
        raise ConfigError(
            f"objective={task_name!r} is not known{did_you_mean(str(task_name), OBJECTIVES.names())}; "
            f"registered: {', '.join(OBJECTIVES.names())} (conf/objective/<name>.yaml picks one)"
        )
    cls = OBJECTIVES.get(task_name)
    cls.check_family(model)  # ConfigError: masked LM on a causal decoder …

    kind, node, dm_kwargs = split_config(plain.get("data") or {})  # DataError: unknown source
    source_cls, source_args = check_source(node)  # DataError: a key the source does not take
    fmt = BATCH_FORMATS[kind]
    check_document_mask(
        (plain.get("data") or {}).get("document_mask", False),
        kind=kind,
        source=node["name"],
        separate=source_args.get(
            "separate_documents", getattr(source_cls, "separate_documents", None)
        ),
        objective=task_name,
        position=model.position["name"],
        sinks=(model.sinks or {}).get("name", "none"),
    )
    # ConfigError: translation pairs on an encoder-only model …
    cls.check_batch_format(fmt, f"data={node['name']}")

    block = plain.get("block_size")
    # null = the model's context; 0 is an error, not a default
    block = model.max_seq_len if block is None else block
    block = positive_int(
        "block_size",
        block,
        "a positive number of tokens per training window, at most model.max_seq_len",
    )
    batch = positive_int(
        "batch_size", plain.get("batch_size"), "a positive number of sequences per device per step"
    )
    # sizes against memory, before check_run generates an example at them
    memory = memory or Memory.detect()
    check_run = getattr(source_cls, "check_run", None)
    # tokens per training sequence, at the least (a generated example: one per unit of its size)
    length = block if fmt == "text" else 1
    if check_run is not None:
        n = source_args.get(source_cls.length_key)
        length = min(block, n - 1) if size_bounds.is_int(n) and n > 1 else 1
    size_bounds.check_batches(plain, model, dm_kwargs, length, memory)
    size_bounds.check_probes(plain, model, memory)
    if check_run is not None:
        size_bounds.check_synthetic(
            source_cls,
            source_args,
            model,
            batch,
            dm_kwargs.get("val_batch_size") or batch,
            memory,
        )
        # a generated task's values and its examples x block_size
        check_run(
            source_args,
            block_size=block,
            tokenizer=(plain.get("tokenizer") or {}).get("name"),
            objective=task_name,
            train_min_length=dm_kwargs.get("train_min_length"),
            prompt_is_source=FAMILIES.get(model.family).prompt_is_source,
        )
    # a source whose test text may be val's
    check_test_split = getattr(source_cls, "check_test_split", None)
    if check_test_split is not None:
        check_test_split(source_args, test=plain.get("test", True))
    pos_name = model.position["name"]
    if (fmt == "text" or check_run is not None) and issubclass(
        POSITIONS.get(pos_name), LearnedPosition
    ):
        if cls.data_block_size(block, model.max_seq_len, fmt) > model.max_seq_len:
            raise ConfigError(
                f"block_size={block} exceeds model.max_seq_len={model.max_seq_len}, the rows of "
                f"the learned position table (model/position={pos_name}); lower block_size to at "
                f"most {model.max_seq_len}, raise model.max_seq_len, or use a relative scheme "
                "(model/position=rope)"
            )
    return DataSpec(
        name=node["name"],
        kind=kind,
        batch_format=fmt,
        source_args=freeze(source_args),
        loader=freeze(dm_kwargs),
        block_size=cls.data_block_size(block, model.max_seq_len, fmt),
        batch_size=int(plain["batch_size"]),
        seed=plain.get("seed", 0),  # its type and range: check_optimisation
        num_workers=plain.get("num_workers", 0),
    )


def check_optimisation(plain: Mapping[str, Any]) -> tuple[OptimizerConfig, Schedule]:
    """``optim`` and ``scheduler`` typed by ``src.optim`` (their dataclasses check their own keys
    and values; the schedule's ``check_run`` its horizon and ``min_lr`` against this run), and the
    top-level run values: their types and ranges. Returns the optimiser and schedule configs."""
    # ConfigError: optim.lr=-1, optim.lrr=…, betas …
    optimizer = optimizer_config(plain.get("optim") or {})
    # before the schedule reads it as its horizon
    max_steps = checked_max_steps(plain.get("trainer") or {})
    schedule = schedule_config(plain.get("scheduler") or {"name": "none"})
    # the horizon, min_lr; schedule-free with a moving lr
    check_pair(optimizer, schedule, max_steps)
    # scheduler.decay_from: a stable-phase checkpoint of this run
    _check_branch(plain, schedule, max_steps)
    size_bounds.seed("seed", plain.get("seed", 0))
    workers = plain.get("num_workers", 0)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        fail(
            "num_workers",
            workers,
            "0 (load in the training process) or a number of worker processes",
        )
    threads = plain.get("cpu_threads")
    if threads is not None:
        positive_int(
            "cpu_threads",
            threads,
            "a number of torch threads, 1 or more, or null (torch's default)",
        )
    for key in ("compile", "test", "deterministic", "tf32"):
        if key in plain and not isinstance(plain[key], bool):
            fail(key, plain[key], "true or false")
    mode = plain.get("vocab_size_from", "tokenizer")
    if mode not in ("tokenizer", "model"):
        raise ConfigError(
            f"vocab_size_from={mode!r} is invalid: use tokenizer (model.vocab_size from the "
            "tokenizer) or model (keep model.vocab_size)"
        )
    return optimizer, schedule


def _check_branch_resume(
    plain: Mapping[str, Any], schedule: Schedule, path: str, max_steps: int | None
) -> None:
    """``ckpt_path`` beside ``scheduler.decay_from``: a checkpoint of this branch (its run config
    names the same ``decay_from``: the branch resumed after a preemption) continues it, checked as
    any resume; any other checkpoint is where the branch would start, so it is held to the rule of
    ``decay_from`` itself (``Schedule.check_branch``: not past the stable phase)."""
    resume = str(plain["ckpt_path"])
    ckpt = safe_torch_load(checkpoint_file(resume))
    source = ((ckpt.get("hyper_parameters") or {}).get("cfg")) if isinstance(ckpt, dict) else None
    if not isinstance(source, Mapping):
        return  # the resume's own checks name what is wrong with it
    if (source.get("scheduler") or {}).get("decay_from") == path:
        return
    try:
        schedule.check_branch(resume, int(ckpt.get("global_step", 0)), source, int(max_steps or 0))
    except ConfigError as e:
        raise ConfigError(
            f"ckpt_path={resume} is not a checkpoint of this cooldown branch (it does not record "
            f"scheduler.decay_from={path}), so the branch would start from it, as from a decay_from, "
            f"and {e}. To resume "
            "the branch, give one of its own checkpoints; to branch from this one, set "
            f"scheduler.decay_from={resume} and ~ckpt_path"
        ) from None


def _check_branch(plain: Mapping[str, Any], schedule: Schedule, max_steps: int | None) -> None:
    """A schedule that branches off a checkpoint of another run (``scheduler.decay_from``): the file
    is a checkpoint of the same run (model, objective, data, batches and optimiser as this config),
    and the schedule accepts its step (``Schedule.check_branch``: not past the stable phase)."""
    path = schedule.branch_checkpoint()
    if path is None:
        return
    if plain.get("ckpt_path"):
        _check_branch_resume(plain, schedule, path, max_steps)
        return
    if plain.get("init_from"):
        raise ConfigError(
            f"scheduler.decay_from={path} and init_from={plain['init_from']} are two starts of one "
            "run; keep scheduler.decay_from (it resumes from that checkpoint) and set "
            "init_from=null"
        )
    # CheckpointError: missing, a directory, torn, pickled
    ckpt = safe_torch_load(checkpoint_file(path))
    source = ((ckpt.get("hyper_parameters") or {}).get("cfg")) if isinstance(ckpt, dict) else None
    if not isinstance(source, Mapping):
        raise ConfigError(
            f"scheduler.decay_from={path} has no run config (hyper_parameters.cfg): not a "
            "checkpoint of a src.train run; give a stable-phase checkpoint of the run to branch "
            "from"
        )
    # the model keys the tokenizer fills in after validation (src.config.spec.resolve) are
    # compared when the checkpoint is loaded (SafeCheckpointIO's same-run check); here they are not
    # known yet
    later = (
        {f"model.{k}" for k in TOKENIZER_KEYS}
        if plain.get("vocab_size_from", "tokenizer") == "tokenizer"
        else set()
    )
    diffs = [
        f"{k}: checkpoint {old!r}, now {new!r}"
        for k, old, new in run_differences(source, plain)
        if k not in later
    ]
    if source.get("optim") != plain.get("optim"):
        diffs.append(f"optim: checkpoint {source.get('optim')!r}, now {plain.get('optim')!r}")
    if diffs:
        raise ConfigError(
            f"scheduler.decay_from={path} is a checkpoint of another run ({len(diffs)} setting(s) "
            f"differ: {'; '.join(diffs[:6])}); a cooldown branch continues the same run, so give a "
            "checkpoint of the run with this model, objective, data, seed and optimiser"
        )
    schedule.check_branch(path, int(ckpt.get("global_step", 0)), source, int(max_steps or 0))
