"""Multi-node in simulation: two "nodes" of one process each on localhost (``trainer.num_nodes=2
trainer.devices=1``, started by the test with the environment Lightning reads from an external
launcher: MASTER_ADDR, MASTER_PORT, NODE_RANK, LOCAL_RANK, WORLD_SIZE, as torchrun and SLURM
set it) train under trainer=fsdp2 and give each rank the losses and gradient norms of one node of
two processes, to 1e-6."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.training.conftest import REPO
from tests.training.test_fsdp2 import RECORDER, RUN, run_two_processes

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_nodes_of_one_process_equal_one_node_of_two(tmp_path: Path) -> None:
    one_node = run_two_processes(tmp_path / "one_node")
    port = free_port()
    procs, dirs = [], []
    for node in (0, 1):
        run_dir = tmp_path / f"node{node}"
        dirs.append(run_dir)
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": str(REPO),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "NODE_RANK": str(node),
            "LOCAL_RANK": "0",
            "WORLD_SIZE": "2",
        }
        args = [
            *RUN,
            "batch_size=4",
            "trainer=fsdp2",
            "trainer.accelerator=cpu",
            "trainer.devices=1",
            "trainer.num_nodes=2",
            *RECORDER,
            f"hydra.run.dir={run_dir}",
        ]
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "src.train", *args],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    for rank in (0, 1):
        nodes = torch.load(dirs[rank] / f"steps_rank{rank}.pt")
        assert nodes["loss"] == pytest.approx(one_node[rank]["loss"], abs=1e-6)
        assert nodes["grad_norm"] == pytest.approx(one_node[rank]["grad_norm"], abs=1e-6)
        for a, b in zip(nodes["batches"], one_node[rank]["batches"], strict=True):
            assert torch.equal(a["tokens"], b["tokens"])  # the same data per global rank
