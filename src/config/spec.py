"""The run spec: a run config validated once (``validate_run_config``), frozen, passed down in
parts, and resolved against the tokenizer by a pure function.

    composed config ─► validate_run_config ─► RunSpec
    tokenizer ◄─ spec.section("tokenizer")      datamodule ◄─ spec.data
    resolve(spec, tokenizer) ─► a new RunSpec: special ids, vocabulary size, matched sizes
    objective (LMTask) ◄─ resolved.to_dict() + .model, .optimizer, .schedule
    trainer ◄─ spec.section("trainer" | "callbacks" | "logger")

Nothing downstream checks a value the spec holds, or reads the composed config again. A
checkpoint stores ``spec.to_dict()`` of the resolved spec: plain names and numbers, so it reloads
after code moves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from src.data.tokenizers import Tokenizer
from src.errors import ConfigError
from src.models.config import ModelConfig
from src.models.matching import MatchParams, MatchResult, match_model
from src.objectives import OBJECTIVES
from src.optim import OptimizerConfig, Schedule

#: the model keys ``resolve`` sets from the tokenizer after the config is validated
TOKENIZER_KEYS = (
    "vocab_size",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "decoder_start_token_id",
)


def freeze(node: Any) -> Any:
    """A read-only view of a plain config: mappings become ``MappingProxyType``, lists tuples."""
    if isinstance(node, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in node.items()})
    if isinstance(node, (list, tuple)):
        return tuple(freeze(v) for v in node)
    return node


def thaw(node: Any) -> Any:
    """The plain (mutable) copy of a frozen view: dicts and lists again."""
    if isinstance(node, Mapping):
        return {k: thaw(v) for k, v in node.items()}
    if isinstance(node, tuple):
        return [thaw(v) for v in node]
    return node


@dataclass(frozen=True)
class DataSpec:
    """The ``data`` node checked against its source, with the run values the datamodule takes."""

    name: str  # the registered source (``data=<name>``)
    kind: str  # the source's kind: "text" | "pairs" | "synthetic"
    batch_format: str  # what the objective receives (``src.data.sources.BATCH_FORMATS``)
    source_args: Mapping[str, Any]  # the source's constructor keys, checked against it
    loader: Mapping[str, Any]  # the datamodule's own keys (val_batch_size, epoch_batches, …)
    block_size: int  # tokens per training window (``model.max_seq_len`` when ``block_size=null``)
    batch_size: int  # sequences per device per step
    seed: int
    num_workers: int


@dataclass(frozen=True)
class RunSpec:
    """A run config validated once: the frozen plain config and the typed parts made from it."""

    plain: Mapping[str, Any]  # the whole run config, read-only (``freeze``)
    model: ModelConfig  # validated when made (``ModelConfig.from_dict``)
    objective: str  # the registered objective (``objective.name``)
    data: DataSpec
    optimizer: OptimizerConfig  # optim: its dataclass in src/optim
    schedule: Schedule  # scheduler: its horizon checked against trainer.max_steps
    match_params: MatchParams | None = None  # the reference to match; None: nothing to match

    def to_dict(self) -> dict[str, Any]:
        """The plain mutable run config (what checkpoints and metrics store)."""
        return thaw(self.plain)

    def section(self, key: str) -> dict[str, Any]:
        """A plain mutable copy of one top-level node (``{}`` when absent or null)."""
        return thaw(self.plain.get(key) or {})


@dataclass(frozen=True)
class Resolved:
    """``resolve``'s answer: the new spec, and what it decided that the run reports."""

    spec: RunSpec
    match: MatchResult | None  # match_params' solution, None when the run matches nothing


def resolve(spec: RunSpec, tokenizer: Tokenizer) -> Resolved:
    """A new spec with what only the tokenizer knows, in the one order that works:

    1. the objective's special ids (``LMTask.special_ids``: a [MASK] or start id it may reserve
       after the tokenizer's vocabulary) into ``objective``;
    2. the vocabulary: ``vocab_size_from=tokenizer`` sets ``model.vocab_size`` (the tokenizer's,
       plus the reserved ids) and the bos/eos/pad ids; ``vocab_size_from=model`` keeps the
       model's, which must hold them; every token id set must lie inside it;
    3. ``match_params``: the model's sizes solved to the reference's parameter count.

    Pure: ``spec`` is unchanged; nothing is written or logged.
    """
    plain = spec.to_dict()
    specials = OBJECTIVES.get(spec.objective).special_ids(
        plain["objective"], tokenizer, plain["model"]
    )
    plain["objective"].update(specials.ids)
    vocab = vocabulary(plain, tokenizer, specials.n_reserved)
    plain["model"].update(vocab)
    if spec.match_params is not None:  # new sizes: a new model config, validated as it is made
        plain["model"], result = match_model(plain["model"], spec.match_params)
        model = ModelConfig.from_dict(plain["model"])
    else:  # the validated config with the tokenizer's vocabulary and ids
        result = None
        model = dataclasses.replace(spec.model, **vocab)
    new = dataclasses.replace(spec, plain=freeze(plain), model=model)
    return Resolved(spec=new, match=result)


def vocabulary(plain: Mapping[str, Any], tokenizer: Tokenizer, n_reserved: int) -> dict[str, Any]:
    """The model keys the tokenizer decides (step 2 of ``resolve``); a ``ConfigError`` when an id
    falls outside the vocabulary."""
    model = dict(plain["model"])
    needed = tokenizer.vocab_size + n_reserved
    if plain.get("vocab_size_from", "tokenizer") == "model":
        if model["vocab_size"] < needed:
            extra = f" (+{n_reserved} id(s) reserved by objective={plain['objective']['name']})"
            raise ConfigError(
                f"tokenizer={tokenizer.name} has {tokenizer.vocab_size} tokens"
                f"{extra if n_reserved else ''}, more than model.vocab_size={model['vocab_size']}; "
                f"raise model.vocab_size to at least {needed}, or set vocab_size_from=tokenizer"
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
    return {k: model[k] for k in TOKENIZER_KEYS if k in model}
