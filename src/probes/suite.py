"""Every probe on one model and one probe batch, and the names of its figures.

Figures (``ProbeResult.metrics``; ``docs/probes.md`` defines each):

* ``probe/induction@L<l>H<h>``, ``probe/induction_max``, ``probe/prev_token_max``: the heads of the
  self-attention of the stack that feeds the head (a left-to-right stack only);
* ``probe/attn_entropy@L<l>``, ``probe/sink_mass@L<l>``: that stack's layers (mean over heads); an
  encoder-decoder's encoder self-attention and cross-attention add ``@enc.L<l>`` and
  ``@cross.L<l>``;
* ``probe/lens_loss@L<l>``: the logit lens after block l; ``probe/icl_score``.

A probe that does not apply to the model is skipped with a reason (``ProbeResult.skipped``), never
an error: induction, previous-token heads, the lens and the ICL score need a model that predicts
left to right (``model.left_to_right``; an encoder-only masked LM does not). A layer whose token
mixer is not attention (``model/mixer``) has no map: its attention probes are skipped with the
reason (``attention@L<l>``), the figures keep the stack's layer numbers, and the lens and the ICL
score read every layer as before."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from src.models.components.sinks import SINKS
from src.models.families import TransformerModel
from src.probes.attention_probes import (
    attention_entropy,
    induction_scores,
    previous_token_scores,
    sink_mass,
    visible_keys,
)
from src.probes.batch import ProbeBatch
from src.probes.lens import head_stack, icl_score, logit_lens

#: the prefix of each kind of attention map in a figure's name (the head's stack has none)
KIND_PREFIX = {"self": "", "decoder": "", "encoder": "enc.", "cross": "cross."}


@dataclass
class ProbeResult:
    """Per layer and head, by kind of attention (``self``/``decoder`` = the head's stack)."""

    induction: list[Tensor] = field(default_factory=list)  # per layer [H]
    prev_token: list[Tensor] = field(default_factory=list)  # per layer [H]
    entropy: dict[str, list[Tensor]] = field(default_factory=dict)  # kind prefix -> per layer [H]
    sink: dict[str, list[Tensor]] = field(default_factory=dict)  # kind prefix -> per layer [H]
    lens_loss: list[float] = field(default_factory=list)  # per block of the head's stack
    model_loss: float | None = None
    icl: float | None = None
    skipped: dict[str, str] = field(default_factory=dict)  # probe -> why it does not apply
    # kind prefix -> the stack layer of each entry of ``entropy`` / ``sink`` (and ``induction``,
    # ``prev_token`` for ""); a stack whose layers are all attention numbers them 0, 1, …
    layers: dict[str, list[int]] = field(default_factory=dict)

    def layer(self, prefix: str, index: int) -> int:
        """The stack layer of the ``index``-th map of a kind (mixer layers have none)."""
        numbers = self.layers.get(prefix)
        return numbers[index] if numbers else index

    @property
    def induction_max(self) -> float | None:
        return max(float(s.max()) for s in self.induction) if self.induction else None

    @property
    def prev_token_max(self) -> float | None:
        return max(float(s.max()) for s in self.prev_token) if self.prev_token else None

    def metrics(self) -> dict[str, float]:
        """The flat figures, as logged (``probe/...``)."""
        out: dict[str, float] = {}
        for i, scores in enumerate(self.induction):
            layer = self.layer("", i)
            out.update({f"probe/induction@L{layer}H{h}": float(v) for h, v in enumerate(scores)})
        if self.induction_max is not None:
            out["probe/induction_max"] = self.induction_max
        if self.prev_token_max is not None:
            out["probe/prev_token_max"] = self.prev_token_max
        if self.icl is not None:
            out["probe/icl_score"] = self.icl
        for name, table in (("attn_entropy", self.entropy), ("sink_mass", self.sink)):
            for prefix, layers in table.items():
                out.update(
                    {
                        f"probe/{name}@{prefix}L{self.layer(prefix, i)}": float(v.mean())
                        for i, v in enumerate(layers)
                    }
                )
        out.update({f"probe/lens_loss@L{layer}": v for layer, v in enumerate(self.lens_loss)})
        return out


def check_positions(early: int, late: int, length: int) -> None:
    """The ICL score's positions index the probe sequence (0 .. length-1), early before late."""
    if not (0 < early < late < length):
        raise ValueError(
            f"icl positions early={early}, late={late} must satisfy 0 < early < late < "
            f"length={length}"
        )


def default_icl_positions(batch: ProbeBatch) -> tuple[int, int]:
    """The middle of the first copy and the same place in the second (L/2 and L + L/2)."""
    L = batch.period
    return max(L // 2, 1), L + max(L // 2, 1)


@torch.no_grad()
def run_probes(
    model: TransformerModel, batch: ProbeBatch, icl_positions: tuple[int, int] | None = None
) -> ProbeResult:
    """Every probe that applies to ``model`` on ``batch`` (two forwards: the attention maps, then
    the lens). The caller puts the model in eval mode (dropout off) and restores its mode after."""
    result = ProbeResult()
    maps = model.attention_probs(**batch.probs)
    stacks = model.stacks()
    for a in maps:
        prefix = KIND_PREFIX.get(a.kind, f"{a.kind}.")
        T, S = a.probs.shape[-2:]
        mask = (
            None
            if a.kind == "cross"
            else stacks[a.kind if a.kind in stacks else next(iter(stacks))].mask
        )
        prefix_length = batch.prefix_length if a.kind == "self" else None
        n_visible = visible_keys(mask, T, S, prefix_length, a.probs.device)  # [1|B, T]
        result.entropy.setdefault(prefix, []).append(attention_entropy(a.probs, n_visible).cpu())
        result.layers.setdefault(prefix, []).append(a.layer)
        logit = a.kind != "cross" and SINKS.get(model.config.sinks["name"]).in_softmax
        result.sink.setdefault(prefix, []).append(sink_mass(a.probs, logit).cpu())
        if prefix == "" and model.left_to_right:
            result.induction.append(induction_scores(a.probs, batch.period, batch.offset).cpu())
            result.prev_token.append(previous_token_scores(a.probs).cpu())
    for name, stack in stacks.items():
        for i, block in enumerate(stack.blocks):
            if block.recurrent:
                where = f"{name}." if len(stacks) > 1 else ""
                result.skipped[f"attention@{where}L{i}"] = (
                    f"layer {i} mixes tokens with {block.attn.registry_name}, which has no "
                    "attention map: no induction, previous-token, entropy or sink figure"
                )
    if not model.left_to_right:
        why = (
            f"the {model.config.family} model does not predict left to right (each token sees the "
            "ones after it), so the probes of next-token prediction do not apply"
        )
        for probe in ("induction", "prev_token", "lens_loss", "icl_score"):
            result.skipped[probe] = why
        return result
    lens = logit_lens(model, batch)
    result.lens_loss, result.model_loss = lens.layer_loss, lens.model_loss
    early, late = icl_positions or default_icl_positions(batch)
    check_positions(early, late, batch.length)
    if batch.prefix_length is not None and early < batch.period:
        result.skipped["icl_score"] = (
            f"the early position {early} lies in the prefix-LM's bidirectional prefix (the "
            f"first copy, {batch.period} tokens), where the next token is visible"
        )
    else:
        result.icl = icl_score(lens.token_loss, early, late)
    assert len(result.lens_loss) == len(head_stack(model).blocks)
    return result
