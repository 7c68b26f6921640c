"""Qwen 3 (Qwen Team 2025, arXiv:2505.09388) <-> our decoder_only: Llama's layout plus QK-norm.

Qwen 3 normalises queries and keys with an RMSNorm over each head's ``head_dim`` channels, one
weight [head_dim] per projection shared by the heads, before RoPE (``q_norm``/``k_norm`` in its
attention): our ``model/qk_norm=rmsnorm`` with ``scope: head`` and the model's ``rms_norm_eps``. Its
``head_dim`` (128 in the released models) need not be hidden_size / heads (``model.d_head``). The
projections and norms map as Llama's; the MLP has no biases, so ``attention_bias`` must be false.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from torch import nn

from src.models.components.norms import NORMS
from src.models.components.qk_norm import QK_NORMS
from src.models.config import ModelConfig
from src.models.hf.adapter import ADAPTERS
from src.models.hf.architecture import ANY, setting
from src.models.hf.formats.llama import LlamaAdapter
from src.models.hf.rules import Rule, linear


@ADAPTERS.register("qwen3")
class Qwen3Adapter(LlamaAdapter):
    """Qwen3ForCausalLM (dense; no sliding-window layers)."""

    arch = dataclasses.replace(
        LlamaAdapter.arch,
        bias=False,
        more={"d_head": ANY, "qk_norm": {"name": "rmsnorm", "eps": ANY, "scope": "head"}},
    )

    def config(self, hf: Any) -> ModelConfig:
        self.need(
            not getattr(hf, "use_sliding_window", False),
            "use_sliding_window=True is not supported (our attention has no sliding window)",
        )
        self.need(
            not hf.attention_bias,
            "attention_bias=True is not supported: Qwen 3's MLP has no biases and our "
            "model.bias sets both",
        )
        cfg = super().config(hf)
        return dataclasses.replace(
            cfg, qk_norm={"name": "rmsnorm", "eps": hf.rms_norm_eps, "scope": "head"}
        )

    def rules(self, c: ModelConfig) -> list[Rule]:
        r = super().rules(c)
        for i in range(c.n_layer):  # per-head RMSNorm weights [head_dim]
            a, o = f"model.layers.{i}.self_attn.", f"decoder.blocks.{i}.attn."
            r += linear(o + "q_norm.norm", a + "q_norm", False) + linear(
                o + "k_norm.norm", a + "k_norm", False
            )
        return r

    def export_problems(self, c: ModelConfig) -> list[str]:
        p = super().export_problems(c)
        qk_eps, eps = setting(QK_NORMS, c.qk_norm, "eps"), setting(NORMS, c.norm, "eps")
        if c.qk_norm.get("name") == "rmsnorm" and qk_eps != eps:
            p.append(
                f"model.qk_norm.eps={qk_eps} (Qwen 3 uses rms_norm_eps = model.norm.eps={eps} for "
                "q_norm and k_norm)"
            )
        return p

    def hf_config(self, c: ModelConfig) -> Any:
        from transformers import Qwen3Config

        return Qwen3Config(**self.hf_kwargs(c), use_sliding_window=False)

    def hf_model_class(self) -> type[nn.Module]:
        from transformers import Qwen3ForCausalLM

        return Qwen3ForCausalLM
