"""trainer.tensor_parallel: the decoder-only family's plan (src/models/families/decoder_only.py)
applied by ``src.training.parallel`` on two real CPU processes (gloo), against the unsharded
model, and the configs it refuses in one line.

Two processes each hold half of every block's heads and FFN width; the logits and every
parameter's gradient (gathered whole) equal the unsharded model's to 1e-5 in float32.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from src.checkpoints.load import load_checkpoint
from src.config.trainer_checks import Hardware
from src.config.validate import validate_run_config
from src.errors import ConfigError
from src.models import build_model
from src.models.config import ModelConfig
from tests.conftest import tiny_model_dict
from tests.training.conftest import TINY, compose_train, run_cli
from tests.training.test_fsdp2 import RECORDER, RUN, run_one_process, run_two_processes

CPU = Hardware(cuda_available=False, cuda_count=0, bf16_supported=False, cpu_cores=2)
TINY_FSDP2 = [o for o in TINY if o != "trainer=cpu"] + [
    "trainer=fsdp2",
    "trainer.accelerator=cpu",
    "trainer.devices=2",
]
CASES = {  # GPT-2's layout, and Llama's (RoPE, RMSNorm, SwiGLU without biases)
    "gpt2": {},
    "llama": {
        "position": {"name": "rope"},
        "norm": {"name": "rmsnorm", "eps": 1e-5},
        "ffn": {"name": "swiglu"},
        "bias": False,
    },
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, port: int, case: str, out: str, data_parallel: int = 1) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2 * data_parallel)
    try:
        from torch.distributed.device_mesh import init_device_mesh

        from src.training.parallel import parallelize

        torch.manual_seed(0)
        model = build_model(ModelConfig.from_dict(tiny_model_dict(**CASES[case])))
        whole = {k: v.clone() for k, v in model.state_dict().items()}
        mesh = init_device_mesh(
            "cpu", (data_parallel, 2), mesh_dim_names=("data_parallel", "tensor_parallel")
        )
        parallelize(model, mesh)
        ids = torch.randint(0, 97, (3, 16), generator=torch.Generator().manual_seed(1))
        logits = model(ids).logits  # [B, T, V], whole on every rank
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten())
        loss.backward()
        grads = {
            n: (p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad).detach()
            for n, p in model.named_parameters()
        }
        # FSDP2 puts a split parameter on the 2-D mesh (data_parallel, tensor_parallel), the rest
        # on the data-parallel dimension alone
        sharded = [n for n, p in model.named_parameters() if p.device_mesh.ndim == 2]
        torch.save(
            {"logits": logits.detach(), "grads": grads, "sharded": sharded, "whole": whole},
            Path(out) / f"rank{rank}.pt",
        )
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("case", sorted(CASES))
def test_two_tensor_parallel_processes_equal_the_unsharded_model(tmp_path: Path, case: str) -> None:
    mp.start_processes(_worker, args=(_free_port(), case, str(tmp_path)), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1)]
    model = build_model(ModelConfig.from_dict(tiny_model_dict(**CASES[case])))
    model.load_state_dict(ranks[0]["whole"])
    ids = torch.randint(0, 97, (3, 16), generator=torch.Generator().manual_seed(1))
    logits = model(ids).logits
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten()).backward()
    # every block's q/k/v, out and FFN matrices (and their biases) are on the 2-D mesh;
    # embeddings, norms and the head are not
    split = {n.rsplit(".", 2)[-2] for n in ranks[0]["sharded"]}
    assert split == ({"qkv", "out", "up", "down"} | ({"gate"} if case == "llama" else set()))
    assert len(ranks[0]["sharded"]) == (8 if case == "gpt2" else 5) * 2
    for r in ranks:
        torch.testing.assert_close(r["logits"], logits, rtol=0, atol=1e-5)
        for name, p in model.named_parameters():
            torch.testing.assert_close(r["grads"][name], p.grad, rtol=0, atol=1e-5, msg=name)


@pytest.mark.slow
def test_tensor_parallel_training_equals_one_process(tmp_path: Path) -> None:
    """``trainer=fsdp2 trainer.tensor_parallel=2`` on 2 processes through the command line: both
    ranks read the same batches (one data-parallel rank), and the losses and gradient norms of 5
    steps equal a one-process run's on those batches to 1e-5; the final weights too."""
    ranks = run_two_processes(
        tmp_path / "tp", "trainer.tensor_parallel=2", "trainer.max_steps=5", "batch_size=8"
    )
    assert len(ranks[0]["loss"]) == 5
    for a, b in zip(ranks[0]["batches"], ranks[1]["batches"], strict=True):
        assert torch.equal(a["tokens"], b["tokens"])
    one = run_one_process(tmp_path / "one", ranks[0]["batches"], "trainer.max_steps=5")
    assert one.losses == pytest.approx(ranks[0]["loss"], abs=1e-5)
    assert ranks[1]["loss"] == pytest.approx(ranks[0]["loss"], abs=1e-7)
    assert one.grad_norms == pytest.approx(ranks[0]["grad_norm"], abs=1e-5)
    assert one.losses[-1] < one.losses[0]  # it trained
    final = ranks[0]["weights"][-1]
    for name, w in one.model.state_dict().items():
        torch.testing.assert_close(final[name], w, rtol=0, atol=1e-5, msg=name)


@pytest.mark.slow
def test_a_two_by_two_mesh_equals_the_unsharded_model(tmp_path: Path) -> None:
    """4 processes: FSDP2 over 2 data-parallel ranks, each a tensor-parallel pair (every rank fed
    the same batch, so the data-parallel mean is that batch's gradient)."""
    args = (_free_port(), "gpt2", str(tmp_path), 2)
    mp.start_processes(_worker, args=args, nprocs=4, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(4)]
    model = build_model(ModelConfig.from_dict(tiny_model_dict()))
    model.load_state_dict(ranks[0]["whole"])
    ids = torch.randint(0, 97, (3, 16), generator=torch.Generator().manual_seed(1))
    logits = model(ids).logits
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten()).backward()
    for r in ranks:
        torch.testing.assert_close(r["logits"], logits, rtol=0, atol=1e-5)
        for name, p in model.named_parameters():
            torch.testing.assert_close(r["grads"][name], p.grad, rtol=0, atol=1e-5, msg=name)


REFUSED: list[tuple[dict[str, Any], int, str]] = [
    ({}, 3, "model.n_head=4 is not divisible by it"),
    ({"d_ff": 66}, 4, "model.d_ff=66 is not divisible by it"),
    ({"n_kv_head": 2}, 2, "model.n_kv_head=2: grouped-query attention"),
    ({"position": {"name": "alibi"}}, 2, "model/position adds a score bias per head"),
    ({"position": {"name": "t5_bias"}}, 2, "model/position adds a score bias per head"),
    ({"attention": {"name": "differential"}}, 2, "model/attention"),
    ({"mixer": {"name": "short_conv"}, "position": {"name": "none"}}, 2, "short"),
    ({"family": "encoder_decoder"}, 2, "the encoder_decoder family has no tensor-parallel plan"),
    ({"family": "encoder_only"}, 2, "the encoder_only family has no tensor-parallel plan"),
]


@pytest.mark.parametrize(("overrides", "tp", "says"), REFUSED)
def test_a_model_without_a_split_is_refused_in_one_line(
    overrides: dict[str, Any], tp: int, says: str
) -> None:
    with torch.device("meta"):
        model = build_model(ModelConfig.from_dict(tiny_model_dict(**overrides)))
    with pytest.raises(ConfigError) as err:
        model.tensor_parallel_plan(tp)
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"trainer.tensor_parallel={tp}: ")
    assert says in line and "trainer.tensor_parallel=1" in line


@pytest.mark.slow
def test_a_killed_tensor_parallel_run_resumes_bit_identically(tmp_path: Path) -> None:
    """A TP = 2 run's checkpoint (``state_dict_type=full``: the split matrices gathered whole)
    resumes a run killed at step 5 with steps 4-6 bit-identical to the uninterrupted run's, and
    loads into one process as the very weights the run ended with."""
    common = [
        "trainer.tensor_parallel=2",
        "trainer.max_steps=6",
        "trainer.val_check_interval=3",
        "trainer.limit_val_batches=1",
    ]
    full, failed, resumed = tmp_path / "full", tmp_path / "failed", tmp_path / "resumed"
    whole = run_two_processes(full, *common)
    r = run_cli(
        [
            *RUN,
            "batch_size=4",
            "trainer=fsdp2",
            "trainer.accelerator=cpu",
            "trainer.devices=2",
            *common,
            "+callbacks.faults._target_=tests.faults.FaultInjector",
            "+callbacks.faults.raise_train_step=5",
            f"hydra.run.dir={failed}",
        ],
        cwd=tmp_path,
    )
    assert r.returncode != 0
    last = failed / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 3
    again = run_two_processes(resumed, *common, f"ckpt_path={last}")
    for a, b in zip(whole, again, strict=True):
        assert len(a["loss"]) == 6 and len(b["loss"]) == 3
        assert b["loss"] == a["loss"][3:] and b["grad_norm"] == a["grad_norm"][3:]
    loaded = load_checkpoint(full / "checkpoints" / "last.ckpt")
    assert loaded.global_step == 6
    final, state = whole[0]["weights"][-1], loaded.model.state_dict()
    assert state.keys() == final.keys()
    for name in final:
        assert torch.equal(state[name], final[name]), name


def test_the_launcher_refuses_a_model_without_a_split_before_any_process_starts(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "alibi"
    r = run_cli(
        [
            *RUN,
            "trainer=fsdp2",
            "trainer.accelerator=cpu",
            "trainer.devices=2",
            "trainer.tensor_parallel=2",
            "model/position=alibi",
            f"hydra.run.dir={run_dir}",
        ],
        cwd=tmp_path,
    )
    assert r.returncode != 0  # the one line is the last (run_cli sets HYDRA_FULL_ERROR)
    last = r.stderr.strip().splitlines()[-1]
    assert "trainer.tensor_parallel=2: model/position adds a score bias per head" in last
    assert not (run_dir / "train_rank1.log").exists()  # no second process


def test_a_sharded_checkpoint_is_refused_by_a_tensor_parallel_run(tmp_path: Path) -> None:
    shards = tmp_path / "last.ckpt"
    shards.mkdir()
    torch.save({"global_step": 1}, shards / "meta.pt")
    (shards / "__0_0.distcp").write_bytes(b"")
    overrides = [*TINY_FSDP2, "trainer.tensor_parallel=2", f"ckpt_path={shards}"]
    with pytest.raises(ConfigError) as e:
        validate_run_config(compose_train(overrides, tmp_path), hardware=CPU)
    line = str(e.value)
    assert "\n" not in line and line.startswith(f"ckpt_path={shards} is a sharded checkpoint")
    assert "trainer.tensor_parallel=1" in line and "state_dict_type=full" in line


@pytest.mark.slow
def test_a_one_process_checkpoint_resumes_in_two_tensor_parallel_processes(
    tmp_path: Path,
) -> None:
    """A ``trainer=cpu`` run killed at step 4 (checkpoint at step 3) is resumed by a TP = 2 run:
    steps 4-5 equal the uninterrupted one-process run's to 1e-5 (the weights, Adam's moments of
    the split matrices and the data position all carried over)."""
    common = [
        *RUN,
        "batch_size=4",
        "trainer.max_steps=5",
        "trainer.val_check_interval=3",
        "trainer.limit_val_batches=1",
        *RECORDER,
    ]
    one, killed = tmp_path / "one", tmp_path / "killed"
    for run_dir, extra in (
        (one, []),
        (
            killed,
            [
                "+callbacks.faults._target_=tests.faults.FaultInjector",
                "+callbacks.faults.raise_train_step=4",
            ],
        ),
    ):
        r = run_cli(["trainer=cpu", *common, *extra, f"hydra.run.dir={run_dir}"], cwd=tmp_path)
        assert (r.returncode == 0) == (run_dir == one), r.stderr[-2000:]
    last = killed / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 3
    ranks = run_two_processes(
        tmp_path / "tp",
        "trainer.tensor_parallel=2",
        "trainer.max_steps=5",
        "trainer.val_check_interval=3",
        "trainer.limit_val_batches=1",
        f"ckpt_path={last}",
    )
    whole = torch.load(one / "steps_rank0.pt")
    for x, y in zip(whole["batches"][3:], ranks[0]["batches"], strict=True):
        assert torch.equal(x["tokens"], y["tokens"])
    assert ranks[0]["loss"] == pytest.approx(whole["loss"][3:], abs=1e-5)
    assert ranks[0]["grad_norm"] == pytest.approx(whole["grad_norm"][3:], abs=1e-5)
    # and its own checkpoint keys Adam's states as the one-process run does (torch's ids, group
    # after group), so it resumes in one process too
    mine = torch.load(tmp_path / "tp" / "checkpoints" / "last.ckpt", weights_only=True)
    theirs = torch.load(last, weights_only=True)
    a, b = mine["optimizer_states"][0], theirs["optimizer_states"][0]
    assert [g["params"] for g in a["param_groups"]] == [g["params"] for g in b["param_groups"]]
    assert {i: v["exp_avg"].shape for i, v in a["state"].items()} == {
        i: v["exp_avg"].shape for i, v in b["state"].items()
    }
