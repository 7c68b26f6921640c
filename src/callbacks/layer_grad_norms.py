"""Per-layer gradient norms at chosen steps (by default the first, i.e. at initialisation).

Xiong et al. 2020 ("On Layer Normalization in the Transformer Architecture", Fig. 3 and
Theorem 1) show that at initialisation a post-LN Transformer's gradients grow toward the
output layers, so a large learning rate without warmup is unstable, while a pre-LN
Transformer's stay about the same at every depth. This callback records the evidence::

    callbacks:
      grad_norms:
        _target_: src.callbacks.layer_grad_norms.LayerGradNorms
        steps: [0]
        output_dir: ${paths.output_dir}

After the backward pass of each listed optimizer step (before clipping) it takes, for each
block of each stack (``decoder``, ``encoder``), the L2 norm of the gradient of all the
block's parameters (``block``), of its FFN weights only (``ffn``, Xiong et al.'s W¹/W²) and
of its attention weights (``attn``). They go to ``<output_dir>/grad_norms.json``
(``{"<step>": {"<stack>": {"block": [layer 0, …], "ffn": […], "attn": […]}}}``) and to the
loggers as ``grad_norm/<stack>.<layer>``; ``python -m src.report`` plots them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities import rank_zero_only
from torch import nn

from src.jsonfile import write_json
from src.models import TransformerModel

FILENAME = "grad_norms.json"
STACKS = ("encoder", "decoder")


def grad_norm(params: Sequence[nn.Parameter]) -> float:
    grads = [p.grad.detach().float().norm() for p in params if p.grad is not None]
    return float(torch.stack(grads).norm()) if grads else 0.0


def layer_grad_norms(model: TransformerModel) -> dict[str, dict[str, list[float]]]:
    """``{stack: {"block" | "ffn" | "attn": [norm per layer]}}`` of the gradients now held."""
    out: dict[str, dict[str, list[float]]] = {}
    stacks = model.stacks()
    for name in sorted(stacks, key=STACKS.index):
        blocks = stacks[name].blocks
        rows: dict[str, list[float]] = {"block": [], "ffn": [], "attn": []}
        for block in blocks:
            rows["block"].append(grad_norm(list(block.parameters())))
            rows["ffn"].append(
                grad_norm([p for n, p in block.ffn.named_parameters() if p.dim() > 1])
            )
            rows["attn"].append(
                grad_norm([p for n, p in block.attn.named_parameters() if p.dim() > 1])
            )
        out[name] = rows
    return out


class LayerGradNorms(pl.Callback):
    """Records per-layer gradient norms after the backward pass of the listed steps."""

    def __init__(self, steps: Sequence[int] = (0,), output_dir: str | None = None) -> None:
        self.steps = {int(s) for s in steps}
        self.output_dir = output_dir
        self.records: dict[str, dict[str, dict[str, list[float]]]] = {}

    @rank_zero_only
    def on_after_backward(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        step = int(trainer.global_step)
        # first micro-batch of the step only
        if step not in self.steps or str(step) in self.records:
            return
        model = getattr(pl_module, "model", pl_module)
        norms = layer_grad_norms(model)
        self.records[str(step)] = norms
        flat = {
            f"grad_norm/{stack}.{i}": v
            for stack, rows in norms.items()
            for i, v in enumerate(rows["block"])
        }
        for lg in trainer.loggers:
            lg.log_metrics(flat, step=step)
        if self.output_dir:
            # a NaN norm is written as null
            write_json(Path(self.output_dir) / FILENAME, self.records, indent=1)
