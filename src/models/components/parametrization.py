"""Parametrizations (``model/parametrization=sp|mup``): how init, learning rates, the attention
scale and the output layer change with width.

* ``sp`` — the standard parametrization: the init scheme (``model/init``) as it is, one learning
  rate for every parameter, 1/√D attention, no output multiplier.
* ``mup`` — the Maximal Update Parametrization (Yang et al. 2022, "Tensor Programs V",
  arXiv:2203.03466, Table 3, in its output-multiplier form, Table 8, which the authors' ``mup``
  package implements: ``MuReadout``, ``MuAdam``, ``MuSGD``). With the width multiplier
  m = d_model / base_d_model and each parameter classified by which of its dimensions grow with
  width (the ``mup`` package's ``set_base_shapes``: the model is built a second time, on the meta
  device, at the base width, and the shapes compared):

  ==========================  ==========  =============  ============  =====================
  parameter                   init std    Adam-type LR   SGD LR        Muon (spectral)
  ==========================  ==========  =============  ============  =====================
  hidden (matrix-like)        σ/√m_in     η/m_in         η·m_out/m_in  see ``lr_multipliers``
  embeddings, biases, gains   σ           η              η·m           —
  output (readout) weights    σ           η              η·m           —
  others (fixed shape)        σ           η              η             —
  ==========================  ==========  =============  ============  =====================

  The query projection starts at zero (TP5's recommendation for Transformers). The logits are
  multiplied by 1/m (``output_mult``, applied in ``TransformerModel.logits``, the
  one place every loss and scorer goes through), and attention scores use 1/D instead of 1/√D
  (TP5 §4, Definition 4.1: q and k become correlated during training, so q·k grows like D).
  A weight decay that PyTorch multiplies by the learning rate is divided by the same multiplier,
  so lr·wd is what the base width had (``MuAdam``'s ``decoupled_wd=False``). At m = 1 (the base
  width) ``mup`` differs from ``sp`` only by the 1/D attention scale.

The width axis scales ``d_model``, ``d_ff`` and ``d_head`` (when set) together and keeps the
number of heads and layers: the base model has ``d_model = base_d_model``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import torch
from torch import nn

from src.errors import ConfigError
from src.models.components.attention import MultiHeadAttention
from src.models.components.differential import ATTENTIONS
from src.models.components.residual import PLACEMENTS, Residual
from src.registry import Registry

if TYPE_CHECKING:
    from src.models.config import ModelConfig

PARAMETRIZATIONS: Registry[Parametrization] = Registry(
    "parametrization", conf="model/parametrization", package="src.models.components"
)

#: the learning-rate rules an optimiser asks for: Adam-type (AdamW, Lion, schedule-free; every
#: update entry is O(lr)), SGD (the update follows the gradient's scale), and Muon's hidden
#: matrices under each ``optim.adjust_lr_fn``
Rule = Literal["adam", "sgd", "muon_match_rms_adamw", "muon_original"]


@dataclass(frozen=True)
class WidthShape:
    """How one parameter's dimensions grow with width: ``fan_in``/``fan_out`` multipliers (1 for a
    dimension that does not grow) and ``n_wide``, the number of growing dimensions (2: hidden
    matrix; 1: vector-like, e.g. an embedding, a bias, the readout; 0: fixed)."""

    n_wide: int
    fan_in_mult: float = 1.0
    fan_out_mult: float = 1.0


class Parametrization:
    """A registered parametrization; the model holds one (``TransformerModel.parametrization``)."""

    display: ClassVar[str] = ""
    #: the multiplier of the logits (``TransformerModel.logits``)
    output_mult: float = 1.0

    def attn_scale(self, attn_scale: float | None, head_dim: int) -> float | None:
        """The attention scale the blocks get (None: 1/√D)."""
        return attn_scale

    def init(self, model: nn.Module) -> None:
        """Adjust the weights after the init scheme and the placements have set them."""

    def lr_multipliers(self, model: nn.Module, rule: Rule) -> dict[int, float]:
        """{id(parameter): multiplier of optim.lr} for the parameters whose rate differs from
        optim.lr (empty: one rate for all)."""
        return {}


@PARAMETRIZATIONS.register("sp")
class StandardParametrization(Parametrization):
    """The init scheme and one learning rate as configured, 1/√D attention, no output
    multiplier."""

    display = "standard parametrization"


@PARAMETRIZATIONS.register("mup")
class MaximalUpdate(Parametrization):
    """μP (Yang et al. 2022, Table 3 / Table 8; see the module docstring)."""

    display = "μP"

    def __init__(self, d_model: int, base_d_model: int | None = None) -> None:
        self.base_d_model = d_model if base_d_model is None else int(base_d_model)
        self.width_mult = d_model / self.base_d_model  # m
        self.output_mult = 1.0 / self.width_mult  # Table 8: the readout's 1/fan_in multiplier
        self._shapes: dict[str, WidthShape] | None = None

    @staticmethod
    def check_args(
        base_d_model: Any = None, d_model: int = 0, config: ModelConfig | None = None, **_: Any
    ) -> None:
        base_d_model = d_model if base_d_model is None else base_d_model
        if isinstance(base_d_model, bool) or not isinstance(base_d_model, int) or base_d_model <= 0:
            raise ConfigError(
                f"model.parametrization.base_d_model={base_d_model!r} must be a positive integer "
                "(the width the learning rate was tuned at) or null (this d_model), e.g. "
                "model.parametrization.base_d_model=64"
            )
        if d_model % base_d_model:
            raise ConfigError(
                f"model.parametrization.base_d_model={base_d_model} does not divide "
                f"model.d_model={d_model}; set it to a divisor of d_model (e.g. "
                f"model.parametrization.base_d_model={math.gcd(d_model, base_d_model)})"
            )
        if config is not None:
            uncovered(config, d_model // base_d_model)

    def attn_scale(self, attn_scale: float | None, head_dim: int) -> float | None:
        # TP5 §4 (Definition 4.1): 1/D, not 1/√D
        return 1.0 / head_dim

    def shapes(self, model: nn.Module) -> dict[str, WidthShape]:
        """{parameter name: WidthShape}, from the same model built at the base width on the meta
        device (the ``mup`` package's ``set_base_shapes``); computed once per model."""
        if self._shapes is None:
            self._shapes = width_shapes(model, base_model(model, self.base_d_model))
        return self._shapes

    def init(self, model: nn.Module) -> None:
        # Table 3: hidden weights' init variance ∝ 1/fan_in: the scheme's std at the base width,
        # times 1/√(fan_in multiplier); input, output and vector-like parameters keep theirs
        shapes = self.shapes(model)
        with torch.no_grad():
            for name, p in model.named_parameters():  # a tied weight once
                s = shapes[name]
                if s.n_wide == 2 and s.fan_in_mult != 1.0:
                    p.mul_(s.fan_in_mult**-0.5)
            # TP5 (§D.2 of its appendix, and the mup package's Transformer examples): the query
            # projection starts at zero, so the scores' random part q₀·k₀/D, which shrinks like
            # 1/√D, does not hide the Θ(1) part training adds
            for attention in (m for m in model.modules() if isinstance(m, MultiHeadAttention)):
                attention.projection_weights()["q"].zero_()

    def lr_multipliers(self, model: nn.Module, rule: Rule) -> dict[int, float]:
        out: dict[int, float] = {}
        shapes = self.shapes(model)
        for name, p in model.named_parameters():
            mult = self._rule(shapes[name], rule)
            if mult != 1.0:
                out[id(p)] = mult
        return out

    @staticmethod
    def _rule(s: WidthShape, rule: Rule) -> float:
        if s.n_wide == 2:
            if rule == "adam":  # Table 3: Adam LR of hidden weights η/fan_in
                return 1.0 / s.fan_in_mult
            if rule == "sgd":  # Table 3: SGD LR of hidden weights η (MuSGD: fan_out/fan_in ratio)
                return s.fan_out_mult / s.fan_in_mult
            if rule == "muon_match_rms_adamw":
                # Muon's step has spectral norm lr·0.2·√max(A, B); the spectral condition of
                # feature learning (Yang, Simon & Bernstein 2023, arXiv:2310.17813) asks for
                # Θ(√(fan_out/fan_in)), width-independent when both grow: divide by
                # √(growth of max(A, B))
                return 1.0 / math.sqrt(max(s.fan_in_mult, s.fan_out_mult))
            # "muon_original": Jordan's √max(1, A/B) already gives spectral norm √(A/B)·lr: the
            # spectral condition holds at every width, no multiplier
            return 1.0
        if s.n_wide == 1 and rule == "sgd":
            # Table 3: SGD LR of input weights and biases η·fan_out; the readout's η/fan_in on its
            # 1/m-multiplied weight is η·m on the stored weight (MuSGD's vector-like rule)
            return max(s.fan_in_mult, s.fan_out_mult)
        return 1.0  # Adam: vector-like and fixed parameters keep η


def uncovered(config: ModelConfig, width_mult: int) -> None:
    """Refuse a component whose width dependence μP as implemented here does not set: it names the
    component and the fix."""
    fix = "use model/parametrization=sp, or"
    if (config.init or {}).get("name") != "gpt2":
        raise ConfigError(
            f"model/parametrization=mup covers model/init=gpt2 only (its init is set per width "
            f"from the scheme's width-free std), not model/init={config.init.get('name')}; {fix} "
            "model/init=gpt2"
        )
    if config.attn_scale is not None:
        raise ConfigError(
            f"model/parametrization=mup sets the attention scale to 1/d_head; "
            f"model.attn_scale={config.attn_scale} would override it; {fix} model.attn_scale=null"
        )
    for key, what in (
        ("scale_embeddings", "multiplies the embeddings by √d_model"),
        ("scale_head", "multiplies the hidden states by d_model^-0.5 before the head"),
    ):
        if getattr(config, key):
            raise ConfigError(
                f"model/parametrization=mup does not cover model.{key}=true (it {what}, a second "
                f"width-dependent multiplier); {fix} model.{key}=false"
            )
    placement = PLACEMENTS.get(config.norm_placement)
    if placement.init_sublayer is not Residual.init_sublayer:
        raise ConfigError(
            f"model/parametrization=mup does not cover model.norm_placement="
            f"{config.norm_placement} (it re-initialises its sublayers); {fix} "
            "model.norm_placement=pre"
        )
    name = (config.attention or {}).get("name", "standard")
    if ATTENTIONS.get(name) is not ATTENTIONS.get("standard"):
        raise ConfigError(
            f"model/parametrization=mup does not cover model/attention={name} (its λ "
            f"reparametrisation sums over d_head); {fix} model/attention=standard"
        )
    mixer = (getattr(config, "mixer", None) or {}).get("name", "attention")
    if mixer != "attention" or getattr(config, "layer_mixers", None):
        raise ConfigError(
            f"model/parametrization=mup does not cover model/mixer={mixer} "
            f"(model.layer_mixers={getattr(config, 'layer_mixers', None)}); {fix} "
            "model/mixer=attention"
        )
    if config.d_ff % width_mult or (config.d_head is not None and config.d_head % width_mult):
        raise ConfigError(
            f"model/parametrization=mup scales d_ff and d_head with d_model: model.d_ff="
            f"{config.d_ff} (and model.d_head={config.d_head}) must be multiples of d_model / "
            f"base_d_model = {width_mult}; set model.parametrization.base_d_model to a width that "
            "divides them proportionally"
        )
    base_heads = config.d_model // width_mult
    if config.d_head is None and base_heads % config.n_head:
        raise ConfigError(
            f"model/parametrization=mup keeps model.n_head={config.n_head}, which must divide "
            f"base_d_model={base_heads}; set model.parametrization.base_d_model to a multiple of "
            "n_head"
        )


def base_model(model: nn.Module, base_d_model: int) -> nn.Module:
    """The same model at ``base_d_model`` (d_ff and d_head scaled alike), on the meta device, with
    the standard parametrization (nothing to recurse into)."""
    config = model.config  # type: ignore[attr-defined]
    m = config.d_model // base_d_model
    base = dataclasses.replace(
        config,
        d_model=base_d_model,
        d_ff=config.d_ff // m,
        d_head=None if config.d_head is None else config.d_head // m,
        parametrization={"name": "sp"},
    )
    with torch.device("meta"):
        return type(model)(base)


def width_shapes(model: nn.Module, base: nn.Module) -> dict[str, WidthShape]:
    """Compare every parameter's shape with the base model's (matched by name; ``nn.Linear`` and
    ``nn.Embedding`` weights are [out, in] and [rows, C]: dimension 0 is fan_out)."""
    base_shapes = {n: p.shape for n, p in base.named_parameters()}
    out: dict[str, WidthShape] = {}
    for name, p in model.named_parameters():
        b = base_shapes[name]
        ratios = [a / c for a, c in zip(p.shape, b, strict=True)]
        n_wide = sum(r != 1 for r in ratios)
        if n_wide > 2:
            raise ConfigError(
                f"model/parametrization=mup: the parameter {name} {tuple(p.shape)} grows in "
                f"{n_wide} dimensions; μP covers matrices and vectors; use model/parametrization=sp"
            )
        fan_out = ratios[0] if ratios else 1.0
        fan_in = ratios[1] if len(ratios) > 1 else 1.0
        out[name] = WidthShape(n_wide, fan_in, fan_out)
    return out
