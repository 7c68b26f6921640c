"""Memory per device before launch (src/inspection/memory.py): the estimate against a measured CPU
step (within 15 %), sharding and activation checkpointing in it, and ``trainer.device_memory_gb``
refusing, before any process starts, a run that cannot fit, naming the largest term."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
import torch

from src.config.trainer_checks import Hardware
from src.config.validate import validate_run_config
from src.errors import ConfigError
from src.inspection.memory import check_fits, estimate
from src.models import build_model
from tests.training.conftest import TINY, compose_train, train_in_process

CPU = Hardware(cuda_available=False, cuda_count=0, bf16_supported=False, cpu_cores=2)
SMALL = [o for o in TINY if not o.startswith(("model.", "batch_size", "block_size"))] + [
    "model.d_model=256",
    "model.n_layer=4",
    "model.n_head=8",
    "model.d_ff=1024",
    "model.max_seq_len=256",
    "model.vocab_size=512",
    "vocab_size_from=model",
    "batch_size=8",
    "block_size=256",
]


def spec_of(overrides: list[str], tmp_path: Path):
    return validate_run_config(compose_train([*SMALL, *overrides], tmp_path), hardware=CPU)


def _malloc_in_use() -> int:
    """Bytes the C allocator has handed out now (glibc's mallinfo2: in-use arena + mmapped)."""

    class MallInfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in (
                "arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
            )
        ]  # fmt: skip

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    info = libc.mallinfo2()
    return info.uordblks + info.hblkhd


def test_the_estimate_is_within_15_percent_of_a_measured_cpu_step(tmp_path: Path) -> None:
    try:
        _malloc_in_use()
    except (OSError, AttributeError):
        pytest.skip("needs glibc's mallinfo2")
    spec = spec_of([], tmp_path)
    est = estimate(spec)
    base = _malloc_in_use()
    model = build_model(spec.model).train()
    optimizer = spec.optimizer.build(model, torch.device("cpu"))
    ids = torch.randint(0, 512, (8, 256))
    peak = 0
    for _ in range(2):  # the second step holds the optimizer's states too
        loss = model(input_ids=ids, labels=ids).loss
        peak = max(peak, _malloc_in_use() - base)  # every activation kept for the backward
        loss.backward()
        peak = max(peak, _malloc_in_use() - base)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    assert est.total == pytest.approx(peak, rel=0.15)
    assert est.largest()[0] == "activations"


def test_sharding_and_checkpointing_shrink_their_terms(tmp_path: Path) -> None:
    plain = estimate(spec_of([], tmp_path))
    sharded = estimate(
        spec_of(["trainer=fsdp2", "trainer.accelerator=cpu", "trainer.devices=2"], tmp_path)
    )
    assert sharded.world_size == 2 and sharded.parameters == plain.parameters // 2
    assert sharded.optimizer == plain.optimizer // 2 == plain.parameters  # AdamW: 2 states
    assert sharded.activations == plain.activations  # activations are per device
    recomputed = estimate(spec_of(["trainer.activation_checkpointing=true"], tmp_path))
    assert recomputed.activations < plain.activations / 2


def test_tensor_parallelism_divides_only_the_split_matrices_by_it(tmp_path: Path) -> None:
    """4 processes, tp = 2: the blocks' q/k/v, out and FFN matrices (and FFN-in's bias) are over
    all 4, the embeddings, norms and the other biases over the 2 data-parallel ranks."""
    fsdp2 = ["trainer=fsdp2", "trainer.accelerator=cpu", "trainer.devices=4"]
    whole = estimate(spec_of([], tmp_path))
    with pytest.warns(UserWarning, match="4 training processes on 2 usable CPU cores"):
        tp = estimate(spec_of([*fsdp2, "trainer.tensor_parallel=2"], tmp_path))
    d, f, layers = 256, 1024, 4
    split = layers * (d * 3 * d + d * d + d * f + f + f * d)  # FFN-in's bias: the only one split
    n = whole.parameters // 4  # float32
    assert tp.parameters == int(4 * ((n - split) / 2 + split / 4))
    assert tp.gradients == tp.parameters and tp.optimizer == 2 * tp.parameters  # AdamW
    assert tp.activations == whole.activations  # counted whole (an upper bound)


def test_a_run_that_cannot_fit_is_refused_naming_the_largest_term(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        check_fits(spec_of(["trainer.device_memory_gb=0.01"], tmp_path))
    msg = str(e.value)
    assert "\n" not in msg and "trainer.device_memory_gb=0.01" in msg and "activations" in msg
    assert check_fits(spec_of(["trainer.device_memory_gb=80"], tmp_path)).total > 0
    assert check_fits(spec_of([], tmp_path)) is None  # no limit: nothing estimated


def test_the_runner_refuses_before_training(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="trainer.device_memory_gb"):
        train_in_process([*TINY, "trainer.device_memory_gb=0.00001"], tmp_path)
    assert not (tmp_path / "checkpoints").exists()
