"""Run spec -> the pieces of a run, in the one order that works:

    tokenizer -> datamodule (fits a char vocabulary) -> resolved spec
    (model.vocab_size and special ids from the tokenizer, ids a task reserves, matched sizes)
    -> task (LightningModule built from that spec) -> trainer

``build_run`` is reusable outside Hydra (tests, perf scripts): give it a spec or a composed
config.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig

from src.checkpoints.load import init_from_checkpoint
from src.config.spec import RunSpec, resolve, thaw
from src.config.trainer_checks import lightning_trainer_node
from src.config.validate import validate_run_config
from src.data.datamodule import datamodule_for
from src.data.sources import SOURCES
from src.data.tokenizers import Tokenizer, build_tokenizer
from src.models.matching import report_match
from src.objectives import OBJECTIVES, LMTask
from src.training.budget import write_budget
from src.training.harden import harden_trainer
from src.training.parallel import ActivationCheckpointing


@dataclass
class Run:
    spec: RunSpec  # the resolved run spec the task was built from
    cfg: dict[str, Any]  # its plain config (what checkpoints store)
    tokenizer: Tokenizer
    datamodule: pl.LightningDataModule
    task: LMTask
    batch_format: str  # "text" | "pairs"


def build_run(
    cfg: RunSpec | DictConfig | Mapping[str, Any],
    *,
    rank: int | None = None,
    world_size: int | None = None,
) -> Run:
    """Tokenizer, datamodule, resolved spec and task from a run spec (or a composed run config,
    validated here)."""
    spec = cfg if isinstance(cfg, RunSpec) else validate_run_config(cfg)
    tokenizer = build_tokenizer(spec.section("tokenizer"))
    data = spec.data
    datamodule = datamodule_for(
        data.kind,
        SOURCES.get(data.name)(**thaw(data.source_args)),
        tokenizer,
        block_size=data.block_size,
        batch_size=data.batch_size,
        seed=data.seed,
        num_workers=data.num_workers,
        pin_memory=torch.cuda.is_available(),
        rank=rank,
        world_size=world_size,
        **thaw(data.loader),
    )
    datamodule.prepare_tokenizer()  # a char vocabulary is fitted here, so vocab_size is final below
    resolved = resolve(spec, tokenizer)
    spec = resolved.spec
    if resolved.match is not None:
        report_match(resolved.match, (spec.plain.get("paths") or {}).get("output_dir"))
    datamodule.vocab_size = spec.model.vocab_size  # setup checks every token id against it
    plain = spec.to_dict()
    task = OBJECTIVES.get(spec.objective)(
        plain,
        tokenizer.state_dict(),
        model_config=spec.model,
        optimizer_config=spec.optimizer,
        schedule_config=spec.schedule,
    )
    # fine-tuning: only the weights of that checkpoint (src/checkpoints/load.py)
    if plain.get("init_from"):
        init_from_checkpoint(task, plain["init_from"], resume_path=plain.get("ckpt_path"))
    run = Run(
        spec=spec,
        cfg=plain,
        tokenizer=tokenizer,
        datamodule=datamodule,
        task=task,
        batch_format=data.batch_format,
    )
    # budget.json: parameters, training FLOPs per step and per token
    write_budget(run)
    return run


def ours_unwrapped(error: InstantiationException) -> BaseException | None:
    """The project's own error (a class defined in ``src``: a ``ConfigError`` of a callback's
    constructor) that Hydra's instantiation wrapped, or None when the cause is not ours."""
    seen: BaseException | None = error.__cause__ or error.__context__
    while seen is not None:
        module = type(seen).__module__ or ""
        if module == "src" or module.startswith("src."):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def instantiate_node(node: Any, **kwargs: Any) -> Any:
    """``hydra.utils.instantiate``, raising a constructor's own error as itself (its one line,
    its type in metrics.json) instead of Hydra's "Error in call to target ..." around it."""
    try:
        return instantiate(node, **kwargs)
    except InstantiationException as e:
        ours = ours_unwrapped(e)
        if ours is None:
            raise
        raise ours from None


def build_trainer(spec: RunSpec, extra_callbacks: list[pl.Callback] = ()) -> pl.Trainer:
    """The Lightning Trainer from ``trainer`` with the ``callbacks`` and ``logger`` groups (their
    targets checked by validation: a Lightning Callback or Logger)."""
    callbacks = [instantiate_node(node) for node in spec.section("callbacks").values() if node]
    loggers = [instantiate_node(node) for node in spec.section("logger").values() if node]
    node = spec.section("trainer")
    if node.get("activation_checkpointing"):  # every strategy; before FSDP2 wraps the blocks
        callbacks.append(ActivationCheckpointing())
    trainer = instantiate_node(
        lightning_trainer_node(node),
        callbacks=[*callbacks, *extra_callbacks],
        logger=loggers or False,
        _convert_="partial",
    )
    # atomic weights-only checkpoints, non-finite loss guard (docs/reliability.md)
    return harden_trainer(trainer, spec.plain)
