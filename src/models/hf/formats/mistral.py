"""Mistral 7B (Jiang et al. 2023, arXiv:2310.06825) <-> our decoder_only: Llama's layout plus a
sliding window.

Each query sees the last ``sliding_window`` keys, itself included (§2: W = 4096; transformers
keeps key j for query i when j > i - W, i.e. our ``model/mask=sliding_window`` with
``model.mask.window = sliding_window``). ``sliding_window: null`` (Mistral v0.2 and later) is the
causal mask. The tensors are Llama's, named the same; the projections have no biases.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from torch import nn

from src.models.config import ModelConfig
from src.models.hf.adapter import ADAPTERS
from src.models.hf.architecture import ANY, _node_problems
from src.models.hf.formats.llama import LlamaAdapter

#: our mask node pattern for each value transformers' ``sliding_window`` can take
WINDOWED, CAUSAL = {"name": "sliding_window", "window": ANY}, {"name": "causal"}


@ADAPTERS.register("mistral")
class MistralAdapter(LlamaAdapter):
    """MistralForCausalLM: ``sliding_window`` <-> ``model/mask=sliding_window``."""

    # mask=None: checked in export_problems against the pattern of its name
    arch = dataclasses.replace(LlamaAdapter.arch, bias=False, mask=None)

    def config(self, hf: Any) -> ModelConfig:
        cfg = super().config(hf)  # Mistral's config has no attention_bias: false
        window = getattr(hf, "sliding_window", None)
        if window is None:
            return cfg
        return dataclasses.replace(cfg, mask={"name": "sliding_window", "window": int(window)})

    def export_problems(self, c: ModelConfig) -> list[str]:
        # sliding_window: an int, or null for the causal mask; any other mask is refused
        node = c.mask or CAUSAL
        pattern = CAUSAL if node["name"] == "causal" else WINDOWED
        return super().export_problems(c) + _node_problems("mask", node, pattern)

    def hf_config(self, c: ModelConfig) -> Any:
        from transformers import MistralConfig

        kwargs = self.hf_kwargs(c)
        del kwargs["attention_bias"]  # MistralConfig has no such key: never biases
        window = (c.mask or CAUSAL).get("window")
        return MistralConfig(**kwargs, sliding_window=window)

    def hf_model_class(self) -> type[nn.Module]:
        from transformers import MistralForCausalLM

        return MistralForCausalLM
