"""QK-norm: a norm on the queries and keys before the scores
(``model/qk_norm=none|rmsnorm|layernorm``).

Dehghani et al. 2023 (ViT-22B, arXiv:2302.05442, §2.1) normalise queries and keys because the
attention logits of a large model grow without bound and the softmax collapses to one-hot
(training diverges); a norm bounds the logits. Two scopes are in use, and ``scope`` says which:

* ``head`` — over each head's D channels, one weight [D] shared by the heads (ViT-22B; Qwen 3:
  ``q_norm = RMSNorm(head_dim)`` on ``[B, T, H, D]``);
* ``all`` — over the whole projection of all heads, one weight [H·D] (OLMo 2, Groeneveld et al.
  2024 / OLMo 2 2025: ``q_norm = RMSNorm(num_heads · head_dim)`` on ``[B, T, H·D]``).

Both act on the projections before RoPE rotates them (``MultiHeadAttention`` applies them right
after splitting q, k, v). A registered class here is a *choice*: ``build(n_heads)`` makes the norm
of one projection (``None`` for ``none``), so an attention without QK-norm holds no extra module.
"""

from __future__ import annotations

from typing import Any, ClassVar

from torch import Tensor, nn

from src.errors import ConfigError
from src.models.components.norms import NORMS
from src.registry import Registry

QK_NORMS: Registry[QKNorm] = Registry(
    "qk_norm", conf="model/qk_norm", package="src.models.components"
)
SCOPES = ("head", "all")


class ProjectionNorm(nn.Module):
    """A norm on one projection [B, T, n·D]: over each head's D channels (``head``) or all n·D
    (``all``)."""

    def __init__(self, norm: nn.Module, n_heads: int, head_dim: int, scope: str) -> None:
        super().__init__()
        self.norm, self.n_heads, self.head_dim, self.scope = norm, n_heads, head_dim, scope

    def forward(self, x: Tensor) -> Tensor:  # [B, T, n·D] -> [B, T, n·D]
        if self.scope == "all":
            return self.norm(x)
        # via [B, T, n, D]
        return self.norm(x.unflatten(-1, (self.n_heads, self.head_dim))).flatten(-2)


class QKNorm:
    """A configured QK-norm choice; ``build(n_heads)`` makes the norm for a projection of
    ``n_heads`` heads."""

    #: For diagrams: what it does (None: nothing).
    display: ClassVar[str | None] = None

    def build(self, n_heads: int) -> nn.Module | None:
        return None

    def describe(self) -> str | None:
        return self.display


@QK_NORMS.register("none")
class NoQKNorm(QKNorm):
    """Plain attention: queries and keys as projected (Vaswani et al. 2017)."""


class _NormedQK(QKNorm):
    norm_name: ClassVar[str]

    def __init__(self, head_dim: int, scope: str = "head", **norm_args: Any) -> None:
        self.head_dim, self.scope, self.norm_args = head_dim, scope, norm_args

    @classmethod
    def check_args(cls, *, scope: str = "head", **_: object) -> None:
        if scope not in SCOPES:
            raise ConfigError(
                f"model.qk_norm.scope='{scope}' is not known; use 'head' (each head's channels: "
                "ViT-22B, Qwen 3) or 'all' (the whole projection of all heads: OLMo 2)"
            )

    def build(self, n_heads: int) -> nn.Module:
        width = self.head_dim if self.scope == "head" else n_heads * self.head_dim
        norm = NORMS.build({"name": self.norm_name, **self.norm_args}, d_model=width)
        return ProjectionNorm(norm, n_heads, self.head_dim, self.scope)

    def describe(self) -> str:
        where = "per head" if self.scope == "head" else "over all heads"
        return f"QK-norm: {NORMS.get(self.norm_name).display} {where}"  # type: ignore[attr-defined]


@QK_NORMS.register("rmsnorm")
class RMSQKNorm(_NormedQK):
    """RMSNorm on q and k (Qwen 3 per head; OLMo 2 over all heads), with a learned weight."""

    norm_name = "rmsnorm"

    def __init__(self, head_dim: int, eps: float = 1e-6, scope: str = "head") -> None:
        super().__init__(head_dim, scope, eps=eps)


@QK_NORMS.register("layernorm")
class LayerQKNorm(_NormedQK):
    """LayerNorm on q and k (ViT-22B). Its bias follows ``model.bias``, as every LayerNorm of the
    model (ViT-22B has none: ``model.bias=false``, or ``model.qk_norm.bias=false`` for these two
    alone)."""

    norm_name = "layernorm"

    def __init__(
        self, head_dim: int, bias: bool = True, eps: float = 1e-5, scope: str = "head"
    ) -> None:
        super().__init__(head_dim, scope, eps=eps, bias=bias)
