"""Weight initialisation schemes (``model/init=gpt2|xavier``).

A scheme sets every ``nn.Linear`` and ``nn.Embedding`` of a freshly built model; the norm placement
may then adjust its own sublayers (``Residual.init_sublayer``: DeepNet's β-scaled Xavier, ReZero's
zero gate), which the family does after the scheme (``TransformerModel.init_weights``).

* ``gpt2`` — Radford et al. 2019 (§2.3) as nanoGPT: N(0, std) for matrices and embeddings, zero
  biases, the residual output projections (``attn.out``, ``ffn.down``) scaled by 1/√(2·layers).
* ``xavier`` — the original Transformer's code base (fairseq ``transformer.py``, the setting of
  Xiong et al. 2020, whose Theorem 1 assumes Xavier-initialised weights): Glorot & Bengio 2010
  uniform for every linear layer, zero biases, embeddings N(0, d_model^-1/2), no residual scaling.
"""

from __future__ import annotations

import math
from typing import ClassVar

from torch import nn

from src.errors import ConfigError
from src.registry import Registry

INITS: Registry[Init] = Registry("init", conf="model/init", package="src.models.components")

#: the output projections of the residual branches (the names inside a Block)
RESIDUAL_OUTPUTS = ("attn.out", "ffn.down")


class Init:
    """A registered initialisation scheme: ``apply(model, n_residual)`` sets the weights in
    place."""

    display: ClassVar[str] = ""

    def apply(self, model: nn.Module, n_residual: int) -> None:
        """``n_residual``: the number of residual branches (2 per block; the scaling's 2·layers)."""
        raise NotImplementedError


@INITS.register("gpt2")
class GPT2Init(Init):
    """N(0, std), residual output projections N(0, std/√(2L)), zero biases (Radford et al. 2019,
    §2.3)."""

    display = "GPT-2 init"

    def __init__(self, std: float = 0.02) -> None:
        self.std = float(std)

    @staticmethod
    def check_args(std: float = 0.02, **_: object) -> None:
        if not (isinstance(std, (int, float)) and std > 0):
            raise ConfigError(
                f"model.init_std={std!r} must be a positive number (the GPT-2 init's standard "
                "deviation)"
            )

    def apply(self, model: nn.Module, n_residual: int) -> None:
        for name, module in model.named_modules():
            if isinstance(module, nn.Linear):
                s = (
                    self.std / math.sqrt(n_residual)
                    if name.endswith(RESIDUAL_OUTPUTS)
                    else self.std
                )
                nn.init.normal_(module.weight, 0.0, s)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, self.std)


@INITS.register("xavier")
class XavierInit(Init):
    """Xavier-uniform linear layers, zero biases, embeddings N(0, d^-1/2), no residual scaling
    (fairseq's Transformer, the setting of Vaswani et al. 2017 and Xiong et al. 2020)."""

    display = "Xavier init"

    def apply(self, model: nn.Module, n_residual: int) -> None:
        # a head tied to an embedding shares its weight: it keeps the embedding's N(0, d^-1/2)
        # (fairseq's shared embeddings), never Xavier-uniform over (vocab, d) as if it were a
        # separate linear layer
        tied = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
        for module in model.modules():
            if isinstance(module, nn.Linear):
                if id(module.weight) not in tied:
                    nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, module.embedding_dim**-0.5)
