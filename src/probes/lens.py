"""The logit lens and the per-token loss of the probe batch.

* **logit lens** (nostalgebraist 2020, "interpreting GPT: the logit lens"): the residual stream
  after each block, read through the model's own final norm (when its placement has one) and
  head, scored like the model's output. After the last block it *is* the model's output, so the
  last layer's lens loss equals the model's loss; a layer's value says how much of the final
  prediction is already readable there.
* **in-context-learning score** (Olsson et al. 2022, §2 "in-context learning score": the loss of
  the 500th token minus that of the 50th): the mean loss at a late position minus the mean loss
  at an early one, of the same sequences. On the repeated batch, a late token of the second copy
  is predictable from the first copy, so the score goes from ~0 to about −log(vocabulary) as an
  induction circuit forms.

The block outputs are taken with forward hooks on the blocks of the stack that feeds the head
(the last of ``model.stacks()``), held only during this forward: the normal path runs no extra code.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from src.models.families import TransformerModel
from src.models.families.base import IGNORE_INDEX
from src.probes.batch import ProbeBatch


@dataclass
class LensResult:
    layer_loss: list[float]  # the lens loss after each block of the head's stack, block 0 first
    model_loss: float  # the model's own loss on the probe batch
    token_loss: Tensor  # [B, T] the model's loss on x_k at index k (NaN where x_k is not predicted)


def head_stack(model: TransformerModel) -> nn.Module:
    """The stack whose output the head reads (the last in forward order)."""
    return list(model.stacks().values())[-1]


@torch.no_grad()
def logit_lens(model: TransformerModel, batch: ProbeBatch) -> LensResult:
    """One teacher-forced forward over the probe batch, with the block outputs captured."""
    stack = head_stack(model)
    captured: list[Tensor] = []

    def keep(_module: nn.Module, _inputs: object, output: tuple[Tensor, list[Tensor]]) -> None:
        captured.append(output[0])  # Block.forward -> (x [B, T, C], attention probs)

    handles = [block.register_forward_hook(keep) for block in stack.blocks]
    try:
        out = model(**batch.forward, labels=batch.tokens)
    finally:
        for h in handles:
            h.remove()
    final_norm = stack.final_norm
    layer_loss = []
    for h in captured:
        # [B, T, C] -> [B, T, V]
        logits = model.logits(final_norm(h) if final_norm is not None else h)
        layer_loss.append(float(model.loss(logits, batch.tokens)))
    target = model.score_labels(batch.tokens, out.logits.shape[1])  # [B, T] aligned with the logits
    per_pos = F.cross_entropy(
        out.logits.float().transpose(1, 2), target, ignore_index=IGNORE_INDEX, reduction="none"
    )
    per_pos = per_pos.masked_fill(target == IGNORE_INDEX, float("nan"))  # [B, T] by logit position
    # logit position p predicts x_{p + 1 - offset}: re-index by the predicted token
    token_loss = torch.full_like(per_pos, float("nan"))
    shift = 1 - batch.offset
    token_loss[:, shift:] = per_pos[:, : per_pos.shape[1] - shift]
    return LensResult(layer_loss, float(out.loss), token_loss)


def icl_score(token_loss: Tensor, early: int, late: int) -> float:
    """Mean loss at x index ``late`` minus at ``early`` over the batch (Olsson et al. 2022)."""
    return float(token_loss[:, late].mean() - token_loss[:, early].mean())
