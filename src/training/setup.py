"""Config -> the pieces of a run, in the one order that works:

    tokenizer -> datamodule (fits a char vocabulary) -> resolved plain config
    (model.vocab_size and special ids from the tokenizer, ids a task reserves)
    -> task (LightningModule built from that plain config) -> trainer

``build_run`` is reusable outside Hydra (tests, benchmarks): give it a composed config.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig

from src.checkpoints.load import init_from_checkpoint
from src.config.part_checks import TOKENIZER_KEYS
from src.config.validate import validate_run_config
from src.data.datamodule import build_datamodule
from src.data.sources import BATCH_FORMATS, SOURCES
from src.data.tokenizers import Tokenizer, build_tokenizer
from src.errors import ConfigError
from src.models import ModelConfig
from src.objectives import TASKS, LMTask
from src.studies.budget import write_budget
from src.studies.matching import apply_match_params
from src.training.harden import harden_trainer


@dataclass
class Run:
    cfg: dict[str, Any]  # the plain resolved config the task was built from (saved in checkpoints)
    tokenizer: Tokenizer
    datamodule: pl.LightningDataModule
    task: LMTask
    batch_format: str  # "text" | "pairs"


def resolve_vocab(plain: dict[str, Any], tokenizer: Tokenizer, n_reserved: int) -> None:
    """Set ``model.vocab_size`` (and bos/eos/pad ids) from the tokenizer, or check they fit.

    ``vocab_size_from=tokenizer``: model.vocab_size = tokenizer.vocab_size + ids reserved by the
    task. ``vocab_size_from=model``: keep model.vocab_size; it must hold the tokenizer's ids and the
    reserved ones."""
    # tokenizer | model (checked by validate_run_config)
    mode = plain.get("vocab_size_from", "tokenizer")
    model = plain["model"]
    needed = tokenizer.vocab_size + n_reserved
    extra = f" (+{n_reserved} id(s) reserved by task={plain['task']['name']})" if n_reserved else ""
    if mode == "model":
        if model["vocab_size"] < needed:
            raise ConfigError(
                f"tokenizer={tokenizer.name} has {tokenizer.vocab_size} tokens{extra}, more than "
                f"model.vocab_size={model['vocab_size']}; raise model.vocab_size to at least "
                f"{needed}, or set vocab_size_from=tokenizer"
            )
    else:
        model["vocab_size"] = needed
        for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
            model[key] = getattr(tokenizer, key)
    for key in ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id"):
        v = model.get(key)
        if v is not None and not 0 <= v < model["vocab_size"]:
            raise ConfigError(
                f"model.{key}={v} is outside the vocabulary "
                f"(model.vocab_size={model['vocab_size']}); set it to a tokenizer id or null"
            )


def build_run(
    cfg: DictConfig | Mapping[str, Any], *, rank: int | None = None, world_size: int | None = None
) -> Run:
    """Tokenizer, datamodule, resolved config and task from a composed run config."""
    # every config-only check, once, before anything heavy (docs/reliability.md)
    checked = validate_run_config(cfg)
    plain = checked.plain
    cls: type[LMTask] = TASKS.get(plain["task"]["name"])  # type: ignore[assignment]
    tokenizer = build_tokenizer(plain["tokenizer"])
    max_seq_len = int(plain["model"]["max_seq_len"])
    # 0 refused by validate
    block_size = max_seq_len if plain.get("block_size") is None else int(plain["block_size"])
    batch_format = BATCH_FORMATS[SOURCES.get(plain["data"]["name"]).kind]
    datamodule = build_datamodule(
        plain["data"],
        tokenizer,
        block_size=cls.data_block_size(block_size, max_seq_len, batch_format),
        batch_size=int(plain["batch_size"]),
        seed=int(plain["seed"]),
        num_workers=int(plain.get("num_workers", 0)),
        pin_memory=torch.cuda.is_available(),
        rank=rank,
        world_size=world_size,
    )
    datamodule.prepare_tokenizer()  # a char vocabulary is fitted here, so vocab_size is final below
    specials = cls.special_ids(plain["task"], tokenizer, plain["model"])
    plain["task"].update(specials.ids)
    resolve_vocab(plain, tokenizer, specials.n_reserved)
    # setup checks every token id against it
    datamodule.vocab_size = int(plain["model"]["vocab_size"])
    # match_params: model sizes solved to a reference's parameter count (studies/matching.py)
    if apply_match_params(plain):
        model = ModelConfig.from_dict(plain["model"])  # a new model config: validated as it is made
    else:  # the validated config with what the tokenizer decided (vocabulary size, special ids)
        model = dataclasses.replace(
            checked.model, **{k: plain["model"][k] for k in TOKENIZER_KEYS if k in plain["model"]}
        )
    task = cls(
        plain,
        tokenizer.state_dict(),
        model_config=model,
        optimizer_config=checked.optimizer,
        schedule_config=checked.schedule,
    )
    # fine-tuning: only the weights of that checkpoint (src/checkpoints/load.py)
    if plain.get("init_from"):
        init_from_checkpoint(task, plain["init_from"], resume_path=plain.get("ckpt_path"))
    run = Run(
        cfg=plain, tokenizer=tokenizer, datamodule=datamodule, task=task, batch_format=batch_format
    )
    # budget.json: parameters, training FLOPs per step and per token (src/studies/matching.py)
    write_budget(run)
    return run


def build_trainer(cfg: DictConfig, extra_callbacks: list[pl.Callback] = ()) -> pl.Trainer:
    """The Lightning Trainer from ``trainer`` with the ``callbacks`` and ``logger`` groups."""
    callbacks = [
        instantiate(node) for _, node in (cfg.get("callbacks") or {}).items() if node is not None
    ]
    loggers = [
        instantiate(node) for _, node in (cfg.get("logger") or {}).items() if node is not None
    ]
    for c in callbacks:
        if not isinstance(c, pl.Callback):
            raise ConfigError(
                f"callbacks: {type(c).__name__} is not a lightning Callback; check its _target_"
            )
    trainer = instantiate(
        cfg.trainer,
        callbacks=[*callbacks, *extra_callbacks],
        logger=loggers or False,
        _convert_="partial",
    )
    # atomic weights-only checkpoints, non-finite loss guard (docs/reliability.md)
    return harden_trainer(trainer, cfg)
