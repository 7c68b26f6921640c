"""Sharded checkpoints of trainer=fsdp2 (``trainer.strategy.state_dict_type=sharded``: a directory
every rank writes through torch.distributed.checkpoint), with two CPU processes (gloo): a run that
fails after step 7 resumes from its step-6 checkpoint, and steps 7-10 are bit-identical to an
uninterrupted run's (losses and gradient norms); one process loads the 2-process checkpoint
(``load_checkpoint``: the shards gathered) to the very weights the run ended with, and its export
to Hugging Face format gives the logits of an export of those weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from src.checkpoints.io import safe_torch_load
from src.checkpoints.load import load_checkpoint
from src.errors import CheckpointError
from src.models.hf.convert import to_hf
from tests.training.conftest import GLOO_TRANSPORT_FAULT, TINY, run_cli, run_cli_processes
from tests.training.test_fsdp2 import RECORDER

SHARDED = [o for o in TINY if o != "trainer=cpu"] + [
    "trainer=fsdp2",
    "trainer.accelerator=cpu",
    "trainer.devices=2",
    "trainer.strategy.state_dict_type=sharded",
    "trainer.max_steps=10",
    "trainer.val_check_interval=6",
    "trainer.limit_val_batches=1",
    "test=false",
    "optim.lr=3e-3",
    *RECORDER,
]


def run(run_dir: Path, *extra: str, ok: bool = True) -> None:
    if ok:
        r = run_cli_processes([*SHARDED, *extra], run_dir)
    else:
        r = run_cli([*SHARDED, *extra, f"hydra.run.dir={run_dir}"], cwd=run_dir.parent)
    assert (r.returncode == 0) == ok, r.stderr[-3000:]


@pytest.mark.slow
def test_a_killed_sharded_run_resumes_bit_identically(tmp_path: Path) -> None:
    full, failed, resumed = tmp_path / "full", tmp_path / "failed", tmp_path / "resumed"
    run(full)
    run(
        failed,
        "+callbacks.faults._target_=tests.faults.FaultInjector",
        "+callbacks.faults.raise_train_step=7",
        ok=False,
    )
    last = failed / "checkpoints" / "last.ckpt"
    assert last.is_dir() and {"__0_0.distcp", "__1_0.distcp", "meta.pt"} <= {
        p.name for p in last.iterdir()
    }  # one shard per rank
    assert torch.load(last / "meta.pt", weights_only=True)["global_step"] == 6
    run(resumed, f"ckpt_path={last}")
    for rank in (0, 1):
        a = torch.load(full / f"steps_rank{rank}.pt")
        b = torch.load(resumed / f"steps_rank{rank}.pt")
        assert len(a["loss"]) == 10 and len(b["loss"]) == 4  # steps 7-10
        assert b["loss"] == a["loss"][6:]  # bit-identical
        assert b["grad_norm"] == a["grad_norm"][6:]
        for x, y in zip(a["batches"][6:], b["batches"], strict=True):
            assert torch.equal(x["tokens"], y["tokens"])
    # one process reads the 2-process checkpoint (written at step 6): the run's weights after
    # step 6, bit for bit
    final = torch.load(full / "steps_rank0.pt")["weights"][5]
    loaded = load_checkpoint(full / "checkpoints" / "last.ckpt")
    assert loaded.global_step == 6
    state = loaded.model.state_dict()
    assert state.keys() == final.keys()
    assert all(torch.equal(state[k], final[k]) for k in final)
    # Hugging Face export from the sharded checkpoint = export of the unsharded weights
    transformers = pytest.importorskip("transformers")
    unsharded = load_checkpoint(full / "checkpoints" / "last.ckpt").model
    unsharded.load_state_dict(final)
    ids = torch.randint(0, loaded.model.config.vocab_size, (2, 16))
    logits = []
    for name, model in (("sharded", loaded.model), ("unsharded", unsharded)):
        hf = transformers.AutoModelForCausalLM.from_pretrained(to_hf(model, tmp_path / name))
        logits.append(hf(ids).logits)
    torch.testing.assert_close(logits[0], logits[1], rtol=0, atol=1e-5)


def test_a_torn_sharded_checkpoint_is_refused_in_one_line(tmp_path: Path) -> None:
    torn = tmp_path / "last.ckpt"
    torn.mkdir()
    torch.save({"global_step": 1}, torn / "meta.pt")
    (torn / "__0_0.distcp").write_bytes(b"not a shard")
    with pytest.raises(CheckpointError) as e:
        safe_torch_load(torn)
    msg = str(e.value)
    assert "\n" not in msg and str(torn) in msg and "ckpt_path" in msg


def test_only_a_dropped_gloo_connection_runs_again() -> None:
    ci = (
        "[rank1]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
        "pair.cc:537] Read error [127.0.0.1]:26849: Connection reset by peer. This is typically"
    )
    assert GLOO_TRANSPORT_FAULT.search(ci)
    assert not GLOO_TRANSPORT_FAULT.search("RuntimeError: the loss is not finite at step 7")
