"""Position-wise feed-forward networks, registered by name
(``model/ffn=gelu|relu|silu|swiglu|geglu|none``)."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn
from torch.nn import functional as F

from src.errors import ConfigError
from src.registry import Registry

FFNS: Registry[nn.Module] = Registry("ffn", conf="model/ffn", package="src.models.components")
GELU_FORMS = (
    "tanh",
    "none",
)  # F.gelu's approximate: tanh = GPT-2's / T5 v1.1's gelu_new, none = the erf form


def check_gelu_form(*, approximate: str = "tanh", **_: object) -> None:
    """``check_args`` of the GELU-based FFNs (run by ``FFNS.check`` before anything is built, and by
    their constructors)."""
    if approximate not in GELU_FORMS:
        raise ConfigError(
            f"model.ffn.approximate={approximate!r} is not known; use 'tanh' (GPT-2, T5 v1.1's "
            f"gelu_new) or 'none' (the exact erf form, BERT)"
        )


def check_hidden_split(d_ff: int, tp: int) -> None:
    """The FFN's hidden width splits evenly over the tensor-parallel ranks."""
    if d_ff % tp:
        raise ConfigError(
            f"trainer.tensor_parallel={tp}: model.d_ff={d_ff} is not divisible by it; choose a "
            "divisor of d_ff, or trainer.tensor_parallel=1"
        )


class MLP(nn.Module):
    """Two-layer MLP: C -> F -> C with an elementwise activation (subclasses pick it)."""

    display = "MLP"  # the name diagrams use
    formula: str | None = None  # a one-line formula for diagrams, when the name is not enough

    def __init__(self, d_model: int, d_ff: int, bias: bool = True, dropout: float = 0.0) -> None:
        super().__init__()
        self.up = nn.Linear(d_model, d_ff, bias=bias)
        self.down = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def act(self, x: Tensor) -> Tensor:
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:  # [B, T, C] -> [B, T, F] -> [B, T, C]
        return self.dropout(self.down(self.act(self.up(x))))

    def tensor_parallel_plan(self, tp: int) -> dict[str, Any]:
        """Megatron's split (Shoeybi et al. 2019, §3): ``up`` column-wise, ``down`` row-wise, each
        rank one slice of the hidden width F."""
        from src.models.components.tensor_parallel import ColwiseParallel, RowwiseParallel

        check_hidden_split(self.up.out_features, tp)
        return {"up": ColwiseParallel(), "down": RowwiseParallel()}


@FFNS.register("gelu")
class GeluMLP(MLP):
    """GELU MLP (Hendrycks & Gimpel 2016). ``approximate='tanh'`` is GPT-2's ``gelu_new``;
    ``'none'`` is the exact erf form BERT uses."""

    display = "GELU"
    check_args = staticmethod(check_gelu_form)

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        bias: bool = True,
        dropout: float = 0.0,
        approximate: str = "tanh",
    ) -> None:
        super().__init__(d_model, d_ff, bias, dropout)
        self.approximate = approximate

    def act(self, x: Tensor) -> Tensor:
        return F.gelu(x, approximate=self.approximate)


@FFNS.register("relu")
class ReluMLP(MLP):
    """ReLU MLP, the 2017 Transformer's FFN(x) = max(0, xW1 + b1)W2 + b2 (Vaswani et al., eq. 2)."""

    display = "ReLU"

    def act(self, x: Tensor) -> Tensor:
        return F.relu(x)


@FFNS.register("silu")
class SiluMLP(MLP):
    """SiLU / swish MLP (Marian's ``activation_function=swish``)."""

    display = "SiLU"

    def act(self, x: Tensor) -> Tensor:
        return F.silu(x)


@FFNS.register("swiglu")
class SwiGLU(nn.Module):
    """SwiGLU (Shazeer 2020, arXiv:2002.05202): down(silu(gate(x)) * up(x)), as Llama.

    Three matrices instead of two: at equal parameters d_ff is about 2/3 of a GELU MLP's.
    """

    display = "SwiGLU"
    formula = "down(silu(gate·x) ⊙ up·x)"

    def __init__(self, d_model: int, d_ff: int, bias: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        self.gate = nn.Linear(d_model, d_ff, bias=bias)
        self.up = nn.Linear(d_model, d_ff, bias=bias)
        self.down = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def act(self, x: Tensor) -> Tensor:
        return F.silu(x)

    def forward(self, x: Tensor) -> Tensor:  # [B, T, C] -> [B, T, F] -> [B, T, C]
        return self.dropout(self.down(self.act(self.gate(x)) * self.up(x)))

    def tensor_parallel_plan(self, tp: int) -> dict[str, Any]:
        """``gate`` and ``up`` column-wise (the same slice of F on a rank), ``down`` row-wise."""
        from src.models.components.tensor_parallel import ColwiseParallel, RowwiseParallel

        check_hidden_split(self.up.out_features, tp)
        return {"gate": ColwiseParallel(), "up": ColwiseParallel(), "down": RowwiseParallel()}


@FFNS.register("geglu")
class GeGLU(SwiGLU):
    """GEGLU (Shazeer 2020, arXiv:2002.05202): down(gelu(gate(x)) * up(x)); T5 v1.1 / flan-T5's
    "gated-gelu" with the tanh approximation (``gelu_new``), ``approximate: none`` for the erf
    form."""

    display = "GEGLU"
    check_args = staticmethod(check_gelu_form)
    formula = "down(gelu(gate·x) ⊙ up·x)"

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        bias: bool = False,
        dropout: float = 0.0,
        approximate: str = "tanh",
    ) -> None:
        super().__init__(d_model, d_ff, bias, dropout)
        self.approximate = approximate

    def act(self, x: Tensor) -> Tensor:
        return F.gelu(x, approximate=self.approximate)


@FFNS.register("none")
class NoFFN(nn.Module):
    """No feed-forward sublayer: the block is its token mixer alone, as in Mamba-2's stack (Dao &
    Gu 2024, §7: norm -> mixer -> residual per layer). The block builds no FFN norm, placement or
    residual for it (``Block``), so it adds 0 parameters and 0 FLOPs; ``model.d_ff`` is unused."""

    display = "none"

    def forward(self, x: Tensor) -> Tensor:  # pragma: no cover - the block never calls it
        raise RuntimeError("model/ffn=none has no sublayer to run; the block skips it")

    def tensor_parallel_plan(self, tp: int) -> dict[str, Any]:
        return {}  # nothing to split
