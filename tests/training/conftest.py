"""Helpers for the training tests: tiny run overrides, in-process composition, CLI runs.

Everything is CPU-sized: a 2-layer, 32-dim character-level model on the embedded corpus
(Python's help texts, no download). The token cache goes to a per-session temporary
directory (TRANSFORMER_LAB_CACHE), also for subprocesses.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

import src.training  # noqa: F401  (registers ${device_precision:} of conf/trainer/default.yaml: a file run alone composes)

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "conf"
SHARED_DATA = REPO.parent / "shared" / "data"

# a 2-layer 32-dim char-level GPT; 4-step runs, validation every 2 steps on 2 batches
TINY = [
    "model=tiny",
    "model.d_model=32",
    "model.n_layer=2",
    "model.n_head=2",
    "model.d_ff=64",
    "model.max_seq_len=32",
    "tokenizer=char",
    "data=embedded",
    "trainer=cpu",
    "batch_size=4",
    "block_size=32",
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "trainer.limit_val_batches=2",
    "trainer.limit_test_batches=2",
    "trainer.log_every_n_steps=1",
    "trainer.enable_progress_bar=false",
    "trainer.enable_model_summary=false",
    "scheduler.warmup_steps=1",
    "callbacks.progress_bar=null",
]


@pytest.fixture(scope="session", autouse=True)
def one_thread() -> None:
    """One intra-op thread: on a shared 2-core machine two OpenMP threads spin against each
    other and a tiny step gets ~20x slower."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session", autouse=True)
def token_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("token_cache")
    old = os.environ.get("TRANSFORMER_LAB_CACHE")
    os.environ["TRANSFORMER_LAB_CACHE"] = str(d)
    yield d
    if old is None:
        os.environ.pop("TRANSFORMER_LAB_CACHE", None)
    else:
        os.environ["TRANSFORMER_LAB_CACHE"] = old


def compose_train(overrides: Sequence[str], run_dir: Path | str) -> DictConfig:
    """conf/train.yaml composed in-process, with Hydra's runtime set so ${hydra:...} resolves."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            "train", overrides=[*overrides, f"hydra.run.dir={run_dir}"], return_hydra_config=True
        )
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(run_dir)
        cfg.hydra.job.num = 0
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        # as @hydra.main hands it to the task function (the ${hydra:...} resolver reads HydraConfig)
        del cfg["hydra"]
    return cfg


def train_in_process(overrides: Sequence[str], run_dir: Path) -> float | None:
    from src.training.runner import train

    return train(compose_train(overrides, run_dir))


def run_cli(
    args: Sequence[str], cwd: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``python -m src.train <args>`` in ``cwd`` (offline, one thread per process)."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(REPO),
        "HYDRA_FULL_ERROR": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "src.train", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# gloo's TCP transport drops a connection now and then on a loaded machine (pytorch/gloo#168,
# pytorch/pytorch#50701: "terminate called after throwing gloo::IoException ... Connection reset by
# peer", the process aborts); a fault of the transport, never of the run's numbers
GLOO_TRANSPORT_FAULT = re.compile(
    r"gloo/transport/tcp/pair\.cc:\d+\].*Connection (reset|closed) by peer"
)


def run_cli_processes(args: Sequence[str], run_dir: Path) -> subprocess.CompletedProcess[str]:
    """A multi-process ``python -m src.train <args> hydra.run.dir=<run_dir>`` that must succeed:
    run again once, from an empty ``run_dir``, when it failed on a dropped gloo connection (the
    second run's records are the ones the test compares)."""
    args = [*args, f"hydra.run.dir={run_dir}"]
    r = run_cli(args, cwd=run_dir.parent)
    if r.returncode != 0 and GLOO_TRANSPORT_FAULT.search(r.stderr):
        shutil.rmtree(run_dir, ignore_errors=True)
        r = run_cli(args, cwd=run_dir.parent)
    return r


def read_csv_metrics(run_dir: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for f in sorted(run_dir.glob("csv/*/metrics.csv")):
        with open(f) as fh:
            rows += list(csv.DictReader(fh))
    return rows


def series(rows: list[dict[str, Any]], key: str) -> dict[int, float]:
    """{step: value} of a logged metric (last value wins)."""
    return {int(r["step"]): float(r[key]) for r in rows if r.get(key) not in (None, "")}
