"""Gradient accumulation (Lightning's accumulate_grad_batches): two micro-batches of B give
the same update as one batch of 2B (same clipping, same AdamW step)."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader

from src.objectives import OBJECTIVES
from src.objectives.base import LMTask
from tests.objectives.test_tasks import TOK, plain_cfg


def make_task() -> LMTask:
    torch.manual_seed(0)  # same initial weights every time
    cfg = plain_cfg({"name": "causal_lm", "prefix_length": None})
    cfg["optim"]["weight_decay"] = 0.1
    return OBJECTIVES.get("causal_lm")(cfg, TOK.state_dict())


def weights(task: LMTask) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in task.model.state_dict().items()}


def fit_one_update(
    batches: list[dict[str, torch.Tensor]], accumulate: int
) -> dict[str, torch.Tensor]:
    task = make_task()
    trainer = pl.Trainer(
        accelerator="cpu",
        max_steps=1,
        accumulate_grad_batches=accumulate,
        gradient_clip_val=0.5,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
    )
    trainer.fit(task, train_dataloaders=DataLoader(batches, batch_size=None))
    assert trainer.global_step == 1
    return weights(task)


def test_two_micro_batches_equal_one_double_batch() -> None:
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 40, (8, 17), generator=g)
    initial = weights(make_task())
    accumulated = fit_one_update([{"tokens": tokens[:4]}, {"tokens": tokens[4:]}], accumulate=2)
    full = fit_one_update([{"tokens": tokens}], accumulate=1)
    for k in full:
        torch.testing.assert_close(
            accumulated[k], full[k], rtol=1e-5, atol=1e-6, msg=lambda m, k=k: f"{k}: {m}"
        )
    # the update moved the weights
    assert max((full[k] - initial[k]).abs().max().item() for k in full) > 1e-4
    # and the comparison can fail
    half_only = fit_one_update([{"tokens": tokens[:4]}], accumulate=1)
    assert any(not torch.allclose(half_only[k], full[k], atol=1e-6) for k in full)
