"""What one Hugging Face format provides (``Adapter``), and the registry of formats (``ADAPTERS``).

A format is one file in ``src/models/hf/formats/`` named after its ``model_type``, holding
one ``Adapter`` subclass registered as ``@ADAPTERS.register("<model_type>")`` (torchtitan's
state-dict adapter per model). The adapter says four things: how a transformers config
maps to our ``ModelConfig`` (``config``), which rules pair our tensors with theirs
(``rules``, plus tied ``copies`` and ``dropped`` patterns with their reasons), which of our
configs it can hold (``arch``, an ``Architecture``), and how to write the transformers
config and model class back (``hf_config``, ``hf_model_class``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from torch import nn

from src.errors import HFConversionError
from src.models.config import ModelConfig
from src.models.hf.architecture import Architecture
from src.models.hf.rules import Rule
from src.registry import Registry


def special_tokens(hf: Any, bos: bool = True) -> dict[str, int | None]:
    """pad / bos / eos ids of a transformers config. transformers allows several eos ids
    (Llama 3); our config holds one: the first. ``bos=False``: a config without one (T5)."""
    eos = hf.eos_token_id
    eos = eos[0] if isinstance(eos, (list, tuple)) and eos else eos
    return {
        "pad_token_id": hf.pad_token_id,
        "bos_token_id": hf.bos_token_id if bos else None,
        "eos_token_id": eos,
    }


def special_tokens_to_hf(c: ModelConfig) -> dict[str, int | None]:
    """The reverse of ``special_tokens``: our ids as transformers config keys."""
    return {
        "pad_token_id": c.pad_token_id,
        "bos_token_id": c.bos_token_id,
        "eos_token_id": c.eos_token_id,
    }


class Adapter(ABC):
    """Converts one Hugging Face ``model_type`` (its registered name).

    Rules name Hugging Face keys as the task model saves them (``transformer.h.0…`` for
    GPT2LMHeadModel); a checkpoint of the bare base model (``h.0…``) gets ``prefix`` added first.
    """

    registry_name: ClassVar[str]  # set by ADAPTERS.register
    arch: ClassVar[Architecture]
    prefix: ClassVar[str]  # the base model's attribute inside the task model ("transformer.")
    outside_prefix: ClassVar[tuple[str, ...]] = ()  # task-head keys that never carry the prefix
    #: (regex, reason): checkpoint tensors we knowingly discard.
    dropped: ClassVar[tuple[tuple[str, str], ...]] = ()

    @property
    def model_type(self) -> str:
        return self.registry_name

    @property
    def family(self) -> str:
        return self.arch.family

    @abstractmethod
    def config(self, hf: Any) -> ModelConfig:
        """Our config from a transformers config object; ``need`` refuses what we cannot
        reproduce."""

    @abstractmethod
    def rules(self, c: ModelConfig) -> list[Rule]:
        """Every tensor of our model for ``c``, each paired with the Hugging Face tensor(s) it is
        made of."""

    def copies(self, c: ModelConfig) -> dict[str, str]:
        """Hugging Face keys holding copies of one of our tensors (tied weights): {theirs: ours}."""
        return {"lm_head.weight": "tok_embed.weight"} if c.tie_embeddings else {}

    def export_problems(self, c: ModelConfig) -> list[str]:
        """Why ``c`` cannot be written as this model_type (empty when it can)."""
        return self.arch.problems(c)

    @abstractmethod
    def hf_config(self, c: ModelConfig) -> Any:
        """The transformers config object for ``c`` (``to_hf`` adds ``architectures``)."""

    @abstractmethod
    def hf_model_class(self) -> type[nn.Module]:
        """The transformers task model class (the one ``to_hf`` checks its keys against)."""

    def need(self, cond: bool, msg: str) -> None:
        if not cond:
            raise HFConversionError(f"model_type '{self.model_type}': {msg}")


ADAPTERS: Registry[Adapter] = Registry("hf format", package="src.models.hf.formats")


def get_adapter(model_type: str | None) -> Adapter:
    """The registered adapter for ``model_type``; an unknown one lists the formats and how to add
    one."""
    if model_type is None or model_type not in ADAPTERS:
        raise HFConversionError(
            f"Hugging Face model_type {model_type!r} is not supported; supported: "
            f"{', '.join(ADAPTERS.names())}. To add it, write "
            f"src/models/hf/formats/{model_type or '<model_type>'}.py with an Adapter subclass "
            f"registered as @ADAPTERS.register({model_type or '<model_type>'!r}) and a parity test "
            "(docs/hf.md)"
        )
    return ADAPTERS.get(model_type)()
