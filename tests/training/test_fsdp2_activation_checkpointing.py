"""trainer.activation_checkpointing (src/training/parallel.py): each block recomputed in the
backward pass gives the same loss and gradients (dropout included: the RNG state is replayed),
keeps parameter names, works under any strategy; and the parallel keys' one-line refusals."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from src.config.trainer_checks import Hardware
from src.config.validate import validate_run_config
from src.errors import ConfigError
from src.models import build_model
from src.training.parallel import blocks_of, checkpoint_blocks
from src.training.runner import configure_backends
from src.training.setup import build_run, build_trainer
from tests.conftest import tiny_model_dict
from tests.training.conftest import TINY, compose_train
from tests.training.test_fsdp2 import StepRecorder

CPU = Hardware(cuda_available=False, cuda_count=0, bf16_supported=False, cpu_cores=2)


@pytest.mark.parametrize("family", ["decoder_only", "encoder_only", "encoder_decoder"])
def test_recomputed_blocks_give_the_same_loss_and_gradients(family: str) -> None:
    cfg = tiny_model_dict(family=family, dropout=0.1)
    if family == "encoder_decoder":
        cfg.update(n_encoder_layer=2, n_decoder_layer=2, decoder_start_token_id=0)
    model = build_model(cfg).train()
    recomputed = copy.deepcopy(model)
    assert checkpoint_blocks(recomputed) == len(model.parallel_blocks()) > 0
    assert checkpoint_blocks(recomputed) == len(model.parallel_blocks())  # idempotent
    ids = torch.randint(0, cfg["vocab_size"], (3, 16))
    inputs = {"input_ids": ids, "labels": ids}
    if family == "encoder_decoder":
        inputs = {"input_ids": ids, "labels": ids.flip(1)}
    losses, grads = [], []
    for m in (model, recomputed):
        torch.manual_seed(1)  # the same dropout masks
        loss = m(**inputs).loss
        loss.backward()
        losses.append(loss.detach())
        grads.append({n: p.grad for n, p in m.named_parameters()})
    assert torch.allclose(losses[0], losses[1], atol=1e-6)
    assert grads[0].keys() == grads[1].keys()  # parameter names unchanged
    for name, g in grads[0].items():
        assert torch.allclose(g, grads[1][name], atol=1e-6), name
    assert model.state_dict().keys() == recomputed.state_dict().keys()


def test_a_model_without_blocks_is_refused_in_one_line() -> None:
    model = build_model(tiny_model_dict())
    model.parallel_blocks = lambda: []  # a family that declares none
    with pytest.raises(ConfigError) as e:
        blocks_of(model, "trainer=fsdp2")
    msg = str(e.value)
    assert "\n" not in msg and "trainer=fsdp2" in msg and "parallel_blocks()" in msg


def test_a_run_with_activation_checkpointing_trains_the_same(tmp_path: Path) -> None:
    """Three steps through Lightning (trainer=cpu) with and without: equal losses."""
    curves = []
    for on in (False, True):
        spec = validate_run_config(
            compose_train(
                [
                    *TINY,
                    "trainer.max_steps=3",
                    "trainer.limit_val_batches=0",
                    "test=false",
                    "model.dropout=0.1",
                    f"trainer.activation_checkpointing={str(on).lower()}",
                ],
                tmp_path / str(on),
            )
        )
        configure_backends(spec)
        run = build_run(spec)
        recorder = StepRecorder()
        trainer = build_trainer(run.spec, extra_callbacks=[recorder])
        trainer.fit(run.task, datamodule=run.datamodule)
        assert all(getattr(b, "_recomputed", False) == on for b in run.task.model.parallel_blocks())
        curves.append(recorder.losses)
    assert len(curves[0]) == 3 and curves[0] == pytest.approx(curves[1], abs=1e-6)


@pytest.mark.parametrize(
    ("overrides", "key", "fix"),
    [
        (["trainer.tensor_parallel=2"], "trainer.tensor_parallel=2", "trainer=fsdp2"),
        (
            [
                "trainer=fsdp2",
                "trainer.accelerator=cpu",
                "trainer.devices=3",
                "trainer.tensor_parallel=2",
            ],
            "trainer.tensor_parallel=2",
            "trainer.devices to a multiple of 2",
        ),
        (["trainer.tensor_parallel=0"], "trainer.tensor_parallel=0", "1 or more"),
        (
            [
                "trainer=fsdp2",
                "trainer.accelerator=cpu",
                "trainer.devices=2",
                "trainer.tensor_parallel=2",
                "trainer.strategy.state_dict_type=sharded",
            ],
            "trainer.tensor_parallel=2",
            "trainer.strategy.state_dict_type=full",
        ),
        (["trainer.activation_checkpointing=yes"], "trainer.activation_checkpointing", "true"),
        (["trainer.device_memory_gb=-1"], "trainer.device_memory_gb=-1", "in GB"),
    ],
)
def test_parallel_keys_are_refused_in_one_line(
    overrides: list[str], key: str, fix: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as e:
        validate_run_config(compose_train([*TINY, *overrides], tmp_path), hardware=CPU)
    msg = str(e.value)
    assert "\n" not in msg and key in msg and fix in msg


def test_fsdp1_keeps_its_own_checkpointing_key(tmp_path: Path) -> None:
    gpu = Hardware(cuda_available=True, cuda_count=1, bf16_supported=True, device_name="H100")
    with pytest.raises(ConfigError, match="trainer.strategy.activation_checkpointing=true"):
        validate_run_config(
            compose_train(
                [*TINY, "trainer=fsdp", "trainer.activation_checkpointing=true"], tmp_path
            ),
            hardware=gpu,
        )


def test_fsdp2_composes_on_cpu(tmp_path: Path) -> None:
    spec = validate_run_config(
        compose_train(
            [*TINY, "trainer=fsdp2", "trainer.accelerator=cpu", "trainer.devices=2"], tmp_path
        ),
        hardware=CPU,
    )
    strategy = spec.plain["trainer"]["strategy"]
    assert strategy["_target_"].endswith("FSDP2Strategy") and strategy["tensor_parallel"] == 1
