"""The head and the cross-entropy over chunks of tokens, never holding the [N, V] logits.

A training step's largest tensors are the logits [N, V] (N = B·T tokens, V = 50,257 for
GPT-2) and the log-probabilities its loss saves for backward: 0.8 GB each in float32 for GPT-2
small at B 4, T 1024. Here the rows are taken ``chunk`` at a time: each chunk's logits come from
the model's own ``logits`` function (the head, the vocabulary trim, soft-cap, …: one formula),
its loss is summed against the whole batch's count of scored rows, and its gradients (to the
hidden states and to the head's parameters) are computed at once, in the forward, while the
chunk's logits are at hand; backward only scales them by the incoming gradient. So the head's
matmuls run once each, as in the plain path (no recomputation), and at most one chunk's
[chunk, V] logits is alive at a time. The same scheme as Liger-Kernel's fused linear
cross-entropy (Hsu et al. 2024, §3.3) and Wijmans et al. 2024 ("Cut your losses"), written
with the model's own head instead of a fused kernel.

The loss and the gradients equal the plain path's (``cross_entropy(logits(hidden))``) up to
the order of floating-point sums.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from src.models.components.loss import cross_entropy


class _ChunkedHeadCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]
        ctx,
        hidden: Tensor,
        target: Tensor,
        logits_fn: Callable[[Tensor], Tensor],
        chunk: int,
        ignore_index: int,
        *params: nn.Parameter,
    ) -> Tensor:
        """hidden [N, C], target [N] -> mean loss over the scored rows (float32). ``params``: the
        parameters ``logits_fn`` reads (their gradients are returned to autograd)."""
        total = (target != ignore_index).sum()  # 0-d: every chunk divides by the batch's count
        grad_hidden = torch.empty_like(hidden)  # [N, C]
        grad_params: list[Tensor | None] = [None] * len(params)
        loss = torch.zeros((), dtype=torch.float32, device=hidden.device)
        for start in range(0, hidden.shape[0], chunk):
            h = hidden[start : start + chunk].detach().requires_grad_()  # [n, C]
            with torch.enable_grad():
                part = cross_entropy(
                    logits_fn(h), target[start : start + chunk], ignore_index, total
                )  # logits [n, V] live only inside this iteration
            grads = torch.autograd.grad(part, (h, *params), allow_unused=True)
            grad_hidden[start : start + chunk] = grads[0]
            for i, g in enumerate(grads[1:]):
                if g is not None:
                    grad_params[i] = g if grad_params[i] is None else grad_params[i].add_(g)
            loss += part.detach()
        ctx.n_params = len(params)
        ctx.has_grad = [g is not None for g in grad_params]
        ctx.save_for_backward(grad_hidden, *(g for g in grad_params if g is not None))
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        if getattr(ctx, "consumed", False):  # the gradients below were scaled in place
            raise RuntimeError(
                "the chunked loss was differentiated twice (retain_graph=True); compute the loss "
                "again for a second backward, or set objective.loss_chunk_tokens=null"
            )
        ctx.consumed = True
        grad_hidden, *saved = ctx.saved_tensors
        it = iter(saved)
        grad_params = [next(it).mul_(grad) if has else None for has in ctx.has_grad]
        return (grad_hidden.mul_(grad), None, None, None, None, *grad_params)


def chunked_cross_entropy(
    hidden: Tensor,
    target: Tensor,
    logits_fn: Callable[[Tensor], Tensor],
    params: Callable[[], Iterable[nn.Parameter]],
    chunk: int,
    ignore_index: int = -100,
) -> Tensor:
    """``cross_entropy(logits_fn(hidden), target)`` computed ``chunk`` rows at a time.

    hidden [N, C]; target [N] (``ignore_index`` = not scored); logits_fn: [n, C] -> [n, V];
    params: returns every trainable parameter ``logits_fn`` reads (the head's), called only
    when the rows are chunked. N ≤ ``chunk`` is one chunk: the plain path itself. Without gradients (or under ``torch.compile``) the chunks are
    plain ``cross_entropy`` calls summed.
    """
    if hidden.shape[0] <= chunk:
        return cross_entropy(logits_fn(hidden), target, ignore_index)
    if torch.compiler.is_compiling() or not torch.is_grad_enabled():
        total = (target != ignore_index).sum()
        return sum(
            cross_entropy(
                logits_fn(hidden[s : s + chunk]), target[s : s + chunk], ignore_index, total
            )
            for s in range(0, hidden.shape[0], chunk)
        )
    trainable = tuple(p for p in params() if p.requires_grad)
    return _ChunkedHeadCrossEntropy.apply(
        hidden, target, logits_fn, chunk, ignore_index, *trainable
    )
