"""Attention sinks (``model/sinks=none|learned|token``).

Xiao et al. 2023 (StreamingLLM, arXiv:2309.17453, §3) find that trained LMs park the attention a
query does not need on the first tokens (a "sink"): softmax must sum to 1, so a head with nothing
to read still spends its mass somewhere. Miller 2023 ("Attention is off by one") and gpt-oss
(OpenAI 2025, model card §2.2: "a learned bias in the denominator of the softmax") give every head
an explicit place for that mass instead: one learned logit b_h per head joins the softmax's
denominator and reads no value,

    p_ij = exp(s_ij) / (exp(b_h) + Σ_j' exp(s_ij')),

so a row of probabilities sums to 1 - (the sink's share) and a head may attend to nothing.
``token`` instead prepends ``count`` learned sink tokens that every query sees, whatever its mask
(StreamingLLM §3.3's dedicated sink token; Darcet et al. 2024's registers in an encoder): see
``SinkKeys``. A registered class here is a *choice*: ``build(n_head)`` makes the module of one
attention and ``count`` says how many sink tokens a stack holds (``None`` and 0 for ``none``, so
a model without sinks holds no extra parameter and runs exactly as before).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import Tensor, nn

from src.errors import ConfigError
from src.registry import Registry

if TYPE_CHECKING:
    from src.models.components.attention import AttentionBias

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
    #: Whether the sink's mass lies outside the keys whose probabilities a map returns (a logit,
    #: or sink tokens): a row then sums to 1 less the sink's share.
    in_softmax: ClassVar[bool] = False
    #: Sink tokens prepended to the keys of every self-attention (0: none).
    count: int = 0

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


@SINKS.register("token")
class TokenSinks(Sinks):
    """``count`` learned sink tokens before the sequence, visible to every query (StreamingLLM's
    sink token, Xiao et al. 2023 §3.3; Darcet et al. 2024's registers). They take no position,
    see only each other, and are never output: logits, loss and labels keep their length."""

    in_softmax = True

    def __init__(self, count: int = 4) -> None:
        self.count = count
        self.display = f"{count} sink token{'s' if count > 1 else ''} seen by every query"

    @classmethod
    def check_args(cls, *, count: object = 4, **_: object) -> None:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(
                f"model.sinks.count={count!r} must be a positive integer (sink tokens every query "
                "sees; StreamingLLM uses 4), or use model/sinks=none"
            )


@dataclass
class SinkKeys:
    """The sink tokens' keys and values per layer, [1, K, n, D] (the same for every row of the
    batch: the sinks see only each other, never the input). ``Stack`` fills them in one pass of the
    sinks through its blocks (``capturing``), then every attention of the sequence prepends them
    to its keys; a KV cache keeps them once (``KVCache.sinks``), out of its rolling window."""

    count: int
    kv: list[tuple[Tensor, Tensor] | None] = field(default_factory=list)
    capturing: bool = True

    def prepend(
        self, layer: int, k: Tensor, v: Tensor, bias: AttentionBias, T: int
    ) -> tuple[Tensor, Tensor, AttentionBias]:
        """k, v: [B, K, S, D] -> [B, K, n + S, D], and the bias of T queries with n visible columns
        before the S keys (whatever the mask: the sinks stay visible)."""
        if self.capturing:
            self.kv.append((k, v))
            return k, v, bias
        sk, sv = self.kv[layer]  # type: ignore[misc]
        B, n = k.shape[0], self.count
        k = torch.cat([sk.expand(B, -1, -1, -1), k], dim=2)  # [B, K, n + S, D]
        v = torch.cat([sv.expand(B, -1, -1, -1), v], dim=2)
        mask = bias.mask
        if bias.is_causal:
            S = k.shape[2] - n
            mask = torch.ones(T, S, dtype=torch.bool, device=k.device).tril(S - T)[None, None]
        if mask is None:
            return k, v, bias  # every key visible: the sinks too
        # [B|1, H|1, T, S] -> [B|1, H|1, T, n + S]: True (bool) or 0 (additive) for the sinks
        pad = mask.new_ones(*mask.shape[:-1], n) if mask.dtype == torch.bool else None
        pad = mask.new_zeros(*mask.shape[:-1], n) if pad is None else pad
        return k, v, replace(bias, mask=torch.cat([pad, mask], dim=-1), is_causal=False)
