"""Where the norm sits around each sublayer
(``model.norm_placement=pre|post|sandwich|deepnorm|rezero``).

::

    pre      (GPT-2, Llama):        x = x + f(norm(x))              ... final norm before the head
    post     (2017, BERT):          x = norm(x + f(x))              "Add & Norm", no final norm
    sandwich (CogView, Peri-LN):    x = x + norm'(f(norm(x)))       sandwich.py
    deepnorm (DeepNet):             x = norm(α·x + f(x)), β-init    deepnorm.py
    rezero   (ReZero):              x = x + α·f(x), α = 0 at init   rezero.py

This file holds the base class and the two classic placements; each other placement is one
registered class in its own file.

Xiong et al. 2020 (arXiv:2002.04745) show post-norm needs learning-rate warmup because
its gradients near the output are large at initialisation; pre-norm's are not.

A placement is one module *per sublayer* (self-attention, cross-attention, FFN of every
block), so a variant can own parameters (a learned gate), extra norms (a second norm after
the sublayer) and adjust the sublayer's initialisation (``init_sublayer``). Its constructor
asks for the context it needs, by name (the registry passes only what it accepts):

* ``d_model``; ``make_norm`` — a factory for the configured norm (``model/norm``);
* ``n_layer`` — blocks in this stack; ``n_sublayers`` — residual sublayers per block (2, or 3
  with cross-attention); ``stack`` — ``"encoder"`` or ``"decoder"``;
* ``encoder_layers`` / ``decoder_layers`` — the family's depths (0 for a stack it lacks), for
  schemes whose constants depend on both (DeepNet, Wang et al. 2022).

The sublayer's own norm (``attn_norm``, ``cross_norm``, ``ffn_norm`` in the block, the keys
checkpoints and the Hugging Face adapters use) is built by the block when ``uses_norm`` and
handed to ``forward``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from torch import Tensor, nn

from src.registry import Registry

PLACEMENTS: Registry[Residual] = Registry("norm_placement", package="src.models.components")


class Residual(nn.Module):
    """One sublayer's residual connection: combines the stream ``x``, the sublayer's norm and
    ``f``."""

    #: Whether a stack of such blocks ends with a final norm (``ln_f``).
    final_norm: ClassVar[bool] = False
    #: Whether the block builds the sublayer's norm (``<sublayer>_norm``) and passes it to
    #: ``forward``.
    uses_norm: ClassVar[bool] = True
    #: For diagrams: the steps from the stream to the sublayer's output, in order ("norm",
    #: "sublayer", "add" joins the residual; any other word is drawn as a node of that name).
    drawing: ClassVar[tuple[str, ...]] = ()
    #: For diagrams: the label of the residual (skip) connection, and the placement's name ("" = its
    #: registered name).
    residual: ClassVar[str] = "residual"
    title: ClassVar[str] = ""

    def forward(
        self, x: Tensor, norm: nn.Module | None, sublayer: Callable[[Tensor], Tensor]
    ) -> Tensor:
        """x: [B, T, C] -> [B, T, C]."""
        raise NotImplementedError

    def init_sublayer(self, sublayer: nn.Module) -> None:
        """Called once the family has initialised its weights; the default keeps them."""

    def norms(self) -> list[nn.Module]:
        """Norms the placement owns besides the sublayer's own (sandwich's second norm), for
        counting."""
        return []


@PLACEMENTS.register("pre")
class PreNorm(Residual):
    final_norm = True
    title = "pre-norm"
    drawing = ("norm", "sublayer", "add")

    def forward(
        self, x: Tensor, norm: nn.Module | None, sublayer: Callable[[Tensor], Tensor]
    ) -> Tensor:
        return x + sublayer(norm(x))  # type: ignore[misc]


@PLACEMENTS.register("post")
class PostNorm(Residual):
    final_norm = False
    title = "post-norm"
    drawing = ("sublayer", "add", "norm")

    def forward(
        self, x: Tensor, norm: nn.Module | None, sublayer: Callable[[Tensor], Tensor]
    ) -> Tensor:
        return norm(x + sublayer(x))  # type: ignore[misc]
