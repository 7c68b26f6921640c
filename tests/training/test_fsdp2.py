"""trainer=fsdp2 proven with real processes: two CPU processes (gloo) through the command line,
FSDP2 sharding every block and the root, against one process on the same global batch.

The reference is one process fed the very batches both ranks drew, concatenated (rank 0's, then
rank 1's: 2 x 4 sequences per step), so the two runs see the same data: the loss of each step
(FSDP2's is the mean of the ranks' losses; every sequence scores the same number of tokens) and
the gradient norm before clipping agree to 1e-5 in float32 over 10 steps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader

from src.config.validate import validate_run_config
from src.training.parallel import grad_norm
from src.training.runner import configure_backends
from src.training.setup import build_run, build_trainer
from tests.training.conftest import TINY, compose_train, run_cli_processes

STEPS = 10
RUN = [o for o in TINY if o not in ("trainer=cpu", "batch_size=4")] + [
    f"trainer.max_steps={STEPS}",
    "trainer.limit_val_batches=0",
    "test=false",
    "scheduler.warmup_steps=3",
    "optim.lr=3e-3",
]


class StepRecorder(pl.Callback):
    """Each step's batch, local loss and gradient norm (before clipping), saved per rank at the end
    of the fit as ``steps_rank<r>.pt`` (used by the command-line runs through
    ``+callbacks.steps._target_``)."""

    def __init__(self, output_dir: str | None = None) -> None:
        self.output_dir = output_dir
        self.batches: list[dict[str, torch.Tensor]] = []
        self.losses: list[float] = []
        self.grad_norms: list[float] = []
        self.weights: list[dict[str, torch.Tensor]] = []
        self.model: torch.nn.Module | None = None  # the trained model (one-process runs)

    def on_train_batch_start(
        self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int
    ) -> None:
        self.batches.append({k: v.clone() for k, v in batch.items() if torch.is_tensor(v)})

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        # whole under FSDP2 and tensor parallelism: the norm of all shards, across meshes
        self.grad_norms.append(float(grad_norm(pl_module.parameters())))

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self.losses.append(float(outputs["loss"]))
        if self.output_dir is not None:  # the weights after this step, gathered whole (collective)
            from torch.distributed.checkpoint.state_dict import (
                StateDictOptions,
                get_model_state_dict,
            )

            options = StateDictOptions(full_state_dict=True, cpu_offload=True)
            self.weights.append(get_model_state_dict(pl_module.model, options=options))

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.output_dir is not None:
            record = {"batches": self.batches, "loss": self.losses, "grad_norm": self.grad_norms}
            record["weights"] = self.weights
            torch.save(record, Path(self.output_dir) / f"steps_rank{trainer.global_rank}.pt")


class Replay(pl.LightningDataModule):
    """Given batches, one per step, in order."""

    def __init__(self, batches: list[dict[str, torch.Tensor]]) -> None:
        super().__init__()
        self.batches = batches

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.batches, batch_size=None)


RECORDER = [
    "+callbacks.steps._target_=tests.training.test_fsdp2.StepRecorder",
    "+callbacks.steps.output_dir=${paths.output_dir}",
]


def run_two_processes(run_dir: Path, *extra: str) -> list[dict[str, Any]]:
    r = run_cli_processes(
        [
            *RUN,
            "batch_size=4",
            "trainer=fsdp2",
            "trainer.accelerator=cpu",
            "trainer.devices=2",
            *RECORDER,
            *extra,
        ],
        run_dir,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return [torch.load(run_dir / f"steps_rank{i}.pt") for i in (0, 1)]


def run_one_process(run_dir: Path, batches: list[dict[str, torch.Tensor]], *extra: str):
    spec = validate_run_config(
        compose_train([*RUN, "batch_size=8", "trainer=cpu", *extra], run_dir)
    )
    configure_backends(spec)
    run = build_run(spec)
    recorder = StepRecorder()
    trainer = build_trainer(run.spec, extra_callbacks=[recorder])
    trainer.fit(run.task, datamodule=Replay(batches))
    recorder.model = run.task.model
    return recorder


@pytest.mark.slow
def test_fsdp2_on_two_processes_equals_one_process(tmp_path: Path) -> None:
    ranks = run_two_processes(tmp_path / "fsdp2")
    assert len(ranks[0]["loss"]) == len(ranks[1]["loss"]) == STEPS
    # distinct data per rank; one global batch of 8 per step for the reference
    assert not torch.equal(ranks[0]["batches"][0]["tokens"], ranks[1]["batches"][0]["tokens"])
    batches = [
        {k: torch.cat([a[k], b[k]]) for k in a}
        for a, b in zip(ranks[0]["batches"], ranks[1]["batches"], strict=True)
    ]
    one = run_one_process(tmp_path / "one", batches)
    sharded_loss = [(a + b) / 2 for a, b in zip(ranks[0]["loss"], ranks[1]["loss"], strict=True)]
    assert one.losses == pytest.approx(sharded_loss, abs=1e-5)
    assert one.grad_norms == pytest.approx(ranks[0]["grad_norm"], abs=1e-5)
    assert ranks[0]["grad_norm"] == pytest.approx(ranks[1]["grad_norm"], abs=1e-7)
    assert one.losses[-1] < one.losses[0] - 0.1  # it trained
