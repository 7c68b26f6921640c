"""Fixtures for tests that run the tiny model (tests/config, tests/checkpoints, tests/callbacks): Hydra composition of conf/train.yaml, a tiny CPU run
(char tokenizer, 2 layers, d_model 32, T 32), a shared token cache, subprocess helpers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from omegaconf import DictConfig

REPO = Path(__file__).resolve().parents[1]

#: a tiny CPU run: ~20k parameters, checkpoints of ~300 kB, a step in a few milliseconds
TINY = [
    "model=tiny",
    "data=embedded",
    "tokenizer=char",
    "objective=causal_lm",
    "trainer=cpu",
    "scheduler=cosine",
    "model.n_layer=2",
    "model.d_model=32",
    "model.n_head=4",
    "model.d_ff=64",
    "model.max_seq_len=32",
    "block_size=32",
    "batch_size=4",
    "optim.lr=2e-3",
    "scheduler.warmup_steps=2",
    "trainer.max_steps=16",
    "trainer.val_check_interval=4",
    "trainer.limit_val_batches=1",
    "trainer.limit_test_batches=1",
    "test=false",
    "trainer.enable_progress_bar=false",
    "trainer.enable_model_summary=false",
    "trainer.log_every_n_steps=1",
    "~callbacks.progress_bar",
    "~callbacks.throughput",
]


@pytest.fixture(scope="session")
def tiny() -> tuple[str, ...]:
    """Overrides of a tiny CPU run."""
    return tuple(TINY)


@pytest.fixture(scope="session")
def token_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One token cache for every reliability test (``$TRANSFORMER_LAB_CACHE``, also for subprocesses)."""
    path = str(tmp_path_factory.mktemp("token-cache"))
    old = os.environ.get("TRANSFORMER_LAB_CACHE")
    os.environ["TRANSFORMER_LAB_CACHE"] = path
    yield path
    if old is None:
        os.environ.pop("TRANSFORMER_LAB_CACHE", None)
    else:
        os.environ["TRANSFORMER_LAB_CACHE"] = old


@pytest.fixture(scope="module")
def compose() -> Iterator[Callable[..., DictConfig]]:
    """``compose(*overrides)`` -> the composed conf/train.yaml (as ``python -m src.train`` would see it,
    with ``paths`` pointed at a placeholder since there is no Hydra run directory)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import src.training  # noqa: F401  (registers ${device_precision:...} and the other resolvers, as src.train does)

    GlobalHydra.instance().clear()  # in case an earlier test left Hydra initialized
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):

        def _compose(*overrides: str, output_dir: str | Path = "/tmp/unused") -> DictConfig:
            return hydra_compose(
                "train",
                overrides=[f"paths.output_dir={output_dir}", "paths.root_dir=/tmp", *overrides],
            )

        yield _compose


def subprocess_env(**extra: str) -> dict[str, str]:
    """Offline, single-threaded (bit-repeatable on CPU, and kind to a shared machine)."""
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
        HYDRA_FULL_ERROR="1",
    )
    env.pop("TLAB_FAULTS", None)
    env.pop("TLAB_FAULT_MARKER", None)
    env.update(extra)
    return env


def start_train(args: list[str], log: Path, **env: str) -> subprocess.Popen[bytes]:
    """``python -m src.train <args>`` in the repository, output to ``log``."""
    f = open(log, "wb")
    return subprocess.Popen(
        [sys.executable, "-m", "src.train", *args],
        cwd=REPO,
        stdout=f,
        stderr=subprocess.STDOUT,
        env=subprocess_env(**env),
    )


def wait_for(path: Path, proc: subprocess.Popen[bytes], log: Path, timeout: float = 120.0) -> None:
    """Wait until ``path`` exists; fail with the log if the process ends or time runs out."""
    t0 = time.monotonic()
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(
                f"the run ended (rc {proc.returncode}) before reaching the fault point:\n{log.read_text()[-3000:]}"
            )
        if time.monotonic() - t0 > timeout:
            proc.kill()
            pytest.fail(
                f"the fault point was not reached within {timeout}s:\n{log.read_text()[-3000:]}"
            )
        time.sleep(0.05)


@pytest.fixture(scope="session")
def procs() -> SimpleNamespace:
    """Subprocess helpers: ``procs.start(args, log, **env)``, ``procs.wait_for(path, proc, log)``, ``procs.env()``."""
    return SimpleNamespace(start=start_train, wait_for=wait_for, env=subprocess_env)


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """In-process runs single-threaded, like the subprocesses: tiny matmuls gain nothing from threads, and
    on a busy machine idle-spinning OpenMP workers make each step 10x slower."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
