"""Attention sinks (``model/sinks=none|learned``).

Xiao et al. 2023 (StreamingLLM, arXiv:2309.17453, §3) find that trained LMs park the attention a
query does not need on the first tokens (a "sink"): softmax must sum to 1, so a head with nothing
to read still spends its mass somewhere. Miller 2023 ("Attention is off by one") and gpt-oss
(OpenAI 2025, model card §2.2: "a learned bias in the denominator of the softmax") give every head
an explicit place for that mass instead: one learned logit b_h per head joins the softmax's
denominator and reads no value,

    p_ij = exp(s_ij) / (exp(b_h) + Σ_j' exp(s_ij')),

so a row of probabilities sums to 1 - (the sink's share) and a head may attend to nothing. A
registered class here is a *choice*: ``build(n_head)`` makes the module of one attention (``None``
for ``none``, so a model without sinks holds no extra parameter and runs exactly as before).
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn

from src.registry import Registry

SINKS: Registry[Sinks] = Registry("sinks", conf="model/sinks", package="src.models.components")


class SinkLogit(nn.Module):
    """One learned logit per head (gpt-oss's ``sinks`` [H]), zero at the start: a fresh sink takes
    the weight of one key whose score is 0."""

    def __init__(self, n_head: int) -> None:
        super().__init__()
        self.logit = nn.Parameter(torch.zeros(n_head))  # [H]

    def forward(self, scores: Tensor) -> Tensor:
        """scores [B, H, T, S] (masked, -inf where hidden) -> probabilities [B, H, T, S] in float32,
        each row summing to 1 - its sink's share."""
        B, H, T, _ = scores.shape
        col = self.logit.float().view(1, H, 1, 1).expand(B, H, T, 1)  # [H] -> [B, H, T, 1]
        full = torch.cat([scores.float(), col], dim=-1)  # [B, H, T, S + 1]: the sink last
        return full.softmax(dim=-1)[..., :-1]  # drop the sink's column -> [B, H, T, S]


class Sinks:
    """A configured sink choice; ``build(n_head)`` makes the module of one attention."""

    #: For diagrams: what it adds (None: nothing).
    display: ClassVar[str | None] = None
    #: Whether the sink is a logit in the softmax (the probabilities then sum to less than 1).
    in_softmax: ClassVar[bool] = False

    def build(self, n_head: int) -> SinkLogit | None:
        return None

    def describe(self) -> str | None:
        return self.display


@SINKS.register("none")
class NoSinks(Sinks):
    """Plain softmax over the visible keys (Vaswani et al. 2017)."""


@SINKS.register("learned")
class LearnedSink(Sinks):
    """One learned logit per head in the softmax's denominator (gpt-oss; Miller 2023's
    "softmax₁" is the case b_h = 0 fixed)."""

    display = "learned sink logit per head"
    in_softmax = True

    def build(self, n_head: int) -> SinkLogit:
        return SinkLogit(n_head)
