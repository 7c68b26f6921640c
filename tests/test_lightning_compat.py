"""Each private Lightning API src/lightning_compat.py uses is still there, in the form it is used:
an upgrade that moves one fails here, naming it, instead of silently changing what a run does."""

from __future__ import annotations

import typing

import lightning.pytorch as pl
import pytest

from src import lightning_compat


@pytest.fixture()
def trainer() -> pl.Trainer:
    return pl.Trainer(
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )


def test_logs_this_step_reads_the_logger_connectors_flag(trainer: pl.Trainer) -> None:
    assert isinstance(type(trainer._logger_connector).__dict__.get("should_update_logs"), property)
    assert lightning_compat.should_update_logs(trainer) is True  # outside a loop Lightning logs


def test_set_received_sigterm_is_what_trainer_received_sigterm_reads(trainer: pl.Trainer) -> None:
    assert trainer.received_sigterm is False
    lightning_compat.set_received_sigterm(trainer, True)
    assert trainer.received_sigterm is True
    lightning_compat.set_received_sigterm(trainer, False)
    assert trainer.received_sigterm is False


def test_precision_inputs_are_the_values_lightning_accepts() -> None:
    from lightning.fabric.connector import _PRECISION_INPUT

    values = lightning_compat.precision_inputs()
    assert {"32", "32-true", "bf16-mixed", "16-mixed", "64", "bf16"} <= set(values)
    accepted = {
        str(v) for alias in typing.get_args(_PRECISION_INPUT) for v in typing.get_args(alias)
    }
    assert set(values) == accepted


def test_replace_ddp_child_command_patches_both_launchers(monkeypatch: pytest.MonkeyPatch) -> None:
    import lightning.fabric.strategies.launchers.subprocess_script as fabric_launcher
    import lightning.pytorch.strategies.launchers.subprocess_script as pl_launcher

    for module in (pl_launcher, fabric_launcher):
        assert callable(getattr(module, "_hydra_subprocess_cmd", None)), module.__name__
        # restored after
        monkeypatch.setattr(module, "_hydra_subprocess_cmd", module._hydra_subprocess_cmd)

    def command(local_rank: int) -> tuple[list[str], str]:
        return ["child", str(local_rank)], "/"

    assert lightning_compat.replace_ddp_child_command(command) == 2
    assert pl_launcher._hydra_subprocess_cmd(3) == (["child", "3"], "/")
    assert fabric_launcher._hydra_subprocess_cmd is command


def test_the_progress_bars_train_description_is_still_a_method_to_override() -> None:
    """src/callbacks/throughput.py overrides RichProgressBar._get_train_description (else Lightning
    prints 'Epoch 0/-2' for runs counted in steps)."""
    from lightning.pytorch.callbacks import RichProgressBar

    from src.callbacks.throughput import TokensPerSecondBar

    assert callable(RichProgressBar.__dict__.get("_get_train_description"))
    bar = TokensPerSecondBar()
    bar._trainer = pl.Trainer(max_epochs=-1, max_steps=3, logger=False, enable_checkpointing=False)  # type: ignore[assignment]
    assert bar._get_train_description(0) == "Epoch 0"


def test_logged_as_last_fit_step_moves_the_loggers_step_back_by_one_and_restores_it(
    trainer: pl.Trainer,
) -> None:
    loop = trainer.fit_loop.epoch_loop
    loop._batches_that_stepped = 6
    with lightning_compat.logged_as_last_fit_step(trainer):
        assert loop._batches_that_stepped == 5
    assert loop._batches_that_stepped == 6


def test_attached_trainer_is_the_modules_trainer_or_none(trainer: pl.Trainer) -> None:
    module = pl.LightningModule()
    assert lightning_compat.attached_trainer(module) is None  # the public property raises here
    module.trainer = trainer
    assert lightning_compat.attached_trainer(module) is trainer


def test_checkpoint_in_memory_is_what_save_checkpoint_writes(tmp_path) -> None:
    """The dict in memory holds the same keys and tensors ``trainer.save_checkpoint`` writes, and its
    parameters are the live ones (no copy: Preemption keeps it for a step and writes it only when the
    step after it is abandoned, before any update)."""
    import torch

    from src.checkpoints.io import safe_torch_load

    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(3, 2)

        def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
            return self.layer(batch).square().mean()

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.AdamW(self.parameters(), lr=0.1)

        def train_dataloader(self) -> torch.utils.data.DataLoader:
            return torch.utils.data.DataLoader(torch.randn(4, 3), batch_size=2)

    trainer = pl.Trainer(
        max_steps=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    module = Tiny()
    trainer.fit(module)
    in_memory = lightning_compat.checkpoint_in_memory(trainer)
    trainer.save_checkpoint(tmp_path / "saved.ckpt")
    saved = safe_torch_load(tmp_path / "saved.ckpt")
    assert in_memory.keys() == saved.keys() and in_memory["global_step"] == 2
    assert in_memory["state_dict"]["layer.weight"].data_ptr() == module.layer.weight.data_ptr()
    assert torch.equal(in_memory["state_dict"]["layer.weight"], saved["state_dict"]["layer.weight"])
