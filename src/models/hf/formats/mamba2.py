"""Mamba-2 (Dao & Gu 2024, arXiv:2405.21060, §7) <-> our decoder_only with ``model/mixer=mamba2``,
``model/ffn=none`` and ``model/position=none``.

transformers' ``Mamba2ForCausalLM`` is, per layer, RMSNorm -> ``Mamba2Mixer`` -> residual, with no
FFN; then ``norm_f`` and the LM head::

    backbone.embeddings ─ [ x + mixer(norm(x)) ] × L ─ norm_f ─ lm_head (tied or not)
    tok_embed           ─ [ pre-norm block, attn = Mamba2, ffn = none ] × L ─ final_norm ─ head

Our ``Mamba2`` layer keeps ``Mamba2Mixer``'s parameter names and its in_proj order
[z, x, B, C, Δ] (``src/models/mixers/mamba2_layer.py``), so each tensor is copied as is. transformers
uses one ``layer_norm_epsilon`` for the block norms and the mixer's gated norm; ours fixes the
gated norm's at ``Mamba2.norm_eps`` (1e-5, the default of both), so the format holds that value
only. ``head_dim`` maps to ``model.mixer.head_dim`` (E / head_dim = ``num_heads`` heads), and
``num_heads`` to ``model.n_head`` when it divides ``hidden_size`` (else 1; nothing else reads it).
"""

from __future__ import annotations

import math
from typing import Any

from torch import nn

from src.models.config import ModelConfig
from src.models.hf.adapter import ADAPTERS, Adapter, special_tokens, special_tokens_to_hf
from src.models.hf.architecture import ANY, Architecture, setting
from src.models.hf.rules import Rule, Same
from src.models.mixers.base import MIXERS
from src.models.mixers.mamba2_layer import Mamba2

#: our ``model.mixer`` keys -> ``Mamba2Config`` keys (``head_dim`` apart: see ``mixer_shape``)
MIXER_KEYS = {
    "d_state": "state_size",
    "d_conv": "conv_kernel",
    "expand": "expand",
    "n_groups": "n_groups",
    "chunk_size": "chunk_size",
}
#: the tensors of one ``Mamba2Mixer``, named alike on both sides
MIXER_TENSORS = (
    "in_proj.weight",
    "conv1d.weight",
    "conv1d.bias",
    "dt_bias",
    "A_log",
    "D",
    "norm.weight",
    "out_proj.weight",
)


@ADAPTERS.register("mamba2")
class Mamba2Adapter(Adapter):
    """Mamba2ForCausalLM (transformers' torch path; no CUDA kernels needed)."""

    arch = Architecture(
        "decoder_only",
        "pre",
        position={"name": "none"},
        norm={"name": "rmsnorm", "eps": Mamba2.norm_eps},
        ffn={"name": "none"},
        mask={"name": "causal"},
        bias=ANY,  # no attention or FFN in the stack: model.bias biases nothing
        more={"mixer": {"name": "mamba2", **{k: ANY for k in (*MIXER_KEYS, "head_dim")}}},
    )
    prefix, outside_prefix = "backbone.", ("lm_head.",)

    def config(self, hf: Any) -> ModelConfig:
        self.need(hf.hidden_act == "silu", f"hidden_act={hf.hidden_act!r} (ours is SiLU)")
        self.need(not hf.use_bias, "use_bias=True (our in_proj and out_proj have no bias)")
        self.need(hf.use_conv_bias, "use_conv_bias=False (our conv1d always has a bias)")
        low, high = (float(v) for v in hf.time_step_limit)
        self.need(
            low == 0.0 and math.isinf(high),
            f"time_step_limit={tuple(hf.time_step_limit)} (our Δ is not clamped: needs (0, inf))",
        )
        self.need(
            hf.layer_norm_epsilon == Mamba2.norm_eps,
            f"layer_norm_epsilon={hf.layer_norm_epsilon} (our gated norm's ε is "
            f"{Mamba2.norm_eps}, and transformers uses one ε for every norm)",
        )
        C, H, P = hf.hidden_size, hf.num_heads, hf.head_dim
        mixer: dict[str, Any] = {"name": "mamba2"}
        mixer.update({ours: getattr(hf, theirs) for ours, theirs in MIXER_KEYS.items()})
        mixer["head_dim"] = P  # E / P = H heads (without it the mixer takes model.head_dim)
        return ModelConfig(
            family="decoder_only",
            vocab_size=hf.vocab_size,
            d_model=C,
            n_layer=hf.num_hidden_layers,
            n_head=H if C % H == 0 else 1,  # unused by the mixer; must divide d_model
            d_ff=1,  # unused: there is no FFN (the size bound counts none)
            dropout=0.0,
            bias=False,
            tie_embeddings=bool(hf.tie_word_embeddings),
            norm_placement="pre",
            position={"name": "none"},
            norm={"name": "rmsnorm", "eps": hf.layer_norm_epsilon},
            ffn={"name": "none"},
            mask={"name": "causal"},
            mixer=mixer,
            init_std=hf.initializer_range,
            **special_tokens(hf),
        )

    def mixer_settings(self, c: ModelConfig) -> dict[str, Any]:
        """Every argument our Mamba-2 layers are built with (the node, the builder's context,
        the constructor's defaults), plus their heads ``H`` and head dim ``P`` (``Mamba2``)."""
        kwargs = MIXERS.resolve(c.mixer, **c.component_context())[1]
        s = {k: kwargs.get(k, setting(MIXERS, c.mixer, k)) for k in (*MIXER_KEYS, "head_dim")}
        E = s["expand"] * c.d_model
        P = s["head_dim"] or E // c.n_head
        return {**s, "H": E // P, "P": P}

    def rules(self, c: ModelConfig) -> list[Rule]:
        r: list[Rule] = [Same("tok_embed.weight", "backbone.embeddings.weight")]
        for i in range(c.n_layer):
            h, o = f"backbone.layers.{i}.", f"decoder.blocks.{i}."
            r.append(Same(o + "attn_norm.weight", h + "norm.weight"))
            r += [Same(f"{o}attn.{t}", f"{h}mixer.{t}") for t in MIXER_TENSORS]
        r.append(Same("decoder.final_norm.weight", "backbone.norm_f.weight"))
        return r if c.tie_embeddings else r + [Same("head.weight", "lm_head.weight")]

    def export_problems(self, c: ModelConfig) -> list[str]:
        p = super().export_problems(c)
        if c.dropout:
            p.append(f"model.dropout={c.dropout} (Mamba2Config has no dropout; needs 0.0)")
        return p

    def hf_config(self, c: ModelConfig) -> Any:
        from transformers import Mamba2Config

        m = self.mixer_settings(c)
        return Mamba2Config(
            vocab_size=c.vocab_size,
            hidden_size=c.d_model,
            num_hidden_layers=c.n_layer,
            num_heads=m["H"],
            head_dim=m["P"],
            **{theirs: m[ours] for ours, theirs in MIXER_KEYS.items()},
            layer_norm_epsilon=Mamba2.norm_eps,
            hidden_act="silu",
            use_bias=False,
            use_conv_bias=True,
            time_step_limit=(0.0, float("inf")),
            initializer_range=c.init_std,
            tie_word_embeddings=c.tie_embeddings,
            **special_tokens_to_hf(c),
        )

    def hf_model_class(self) -> type[nn.Module]:
        from transformers import Mamba2ForCausalLM

        return Mamba2ForCausalLM
