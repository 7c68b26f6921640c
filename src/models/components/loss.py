"""Token-level cross-entropy with a leaner backward than ``F.cross_entropy``.

The loss is ``F.nll_loss(log_softmax(logits))``, the same kernels ``F.cross_entropy`` runs,
so the value is identical. The gradient is also the same formula,

    ∂loss/∂logits[i, v] = s_i · (softmax(logits)[i, v] - [v = target_i]),
    s_i = g / (number of scored rows) for a scored row, 0 for an ignored one,

but computed *in place* of the saved log-probabilities (``exp_``, ``mul_``, then one
``scatter_add_`` at the targets). Autograd's version allocates two more [N, V] float32
buffers in backward (the one-hot ``nll_loss`` gradient, then ``log_softmax``'s gradient)
and makes one more pass over them; with GPT-2's 50,257-token vocabulary these are the
largest tensors of a training step (N = B·T rows), so this saves memory and time.

Inside ``torch.compile`` the plain ``F.cross_entropy`` is used: the compiler fuses it.

``total`` divides the summed loss by a given count of scored rows instead of this call's own:
the chunked loss (``chunked_loss.py``) scores each chunk of rows against the whole batch's count,
so the chunks' losses (and gradients) add up to the batch's mean.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable
from torch.nn import functional as F


class _CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]
        ctx, logits: Tensor, target: Tensor, ignore_index: int, total: Tensor | None
    ) -> Tensor:
        """logits [N, V] (any float dtype), target [N] -> the summed loss over the scored rows
        divided by ``total`` (None: their number, the mean; float32)."""
        logp = torch.log_softmax(logits, dim=-1, dtype=torch.float32)  # [N, V]
        valid = target != ignore_index  # [N]
        if total is None:  # exactly F.cross_entropy's value
            loss = F.nll_loss(logp, target, ignore_index=ignore_index)
            total = valid.sum()
        else:
            loss = F.nll_loss(logp, target, ignore_index=ignore_index, reduction="sum") / total
        ctx.save_for_backward(logp, torch.where(valid, target, 0), valid, total)
        ctx.logits_dtype = logits.dtype
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None, None]:  # type: ignore[override]
        logp, target, valid, total = ctx.saved_tensors
        scale = torch.where(valid, grad / total, 0.0).to(logp.dtype)[:, None]  # [N, 1]
        g = logp.exp_().mul_(scale)  # softmax · s, reusing the saved buffer
        g.scatter_add_(1, target[:, None], -scale)  # minus s at each target
        return g.to(ctx.logits_dtype), None, None, None


def cross_entropy(
    logits: Tensor, target: Tensor, ignore_index: int = -100, total: Tensor | None = None
) -> Tensor:
    """Mean cross-entropy over rows whose target is not ``ignore_index``; logits [N, V], target [N].
    With ``total`` (a 0-d count): the summed cross-entropy divided by it.

    Computed in float32 whatever the logits' dtype (as ``F.cross_entropy(logits.float(), …)``),
    the gradient returned in the logits' dtype.
    """
    if torch.compiler.is_compiling() or not (logits.requires_grad and torch.is_grad_enabled()):
        if total is None:
            return F.cross_entropy(logits.float(), target, ignore_index=ignore_index)
        summed = F.cross_entropy(logits.float(), target, ignore_index=ignore_index, reduction="sum")
        return summed / total
    return _CrossEntropy.apply(logits, target, ignore_index, total)
