"""Shared test setup: offline Hugging Face, a headless matplotlib, tiny model configs.

Everything runs on CPU without network access; reference models are built with random
weights inside the tests, never downloaded.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = REPO_ROOT / "conf"

# pytest-xdist (``-n auto`` in pyproject's addopts): each worker takes its share of the cores, so
# the workers' torch threads do not oversubscribe the machine
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
if _WORKERS > 1:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // _WORKERS))


def tiny_model_dict(**overrides: Any) -> dict[str, Any]:
    """A GPT-2-shaped decoder at test size (2 layers, d_model 32, 4 heads, T <= 32)."""
    cfg: dict[str, Any] = {
        "family": "decoder_only",
        "vocab_size": 97,
        "d_model": 32,
        "n_layer": 2,
        "n_head": 4,
        "d_ff": 64,
        "max_seq_len": 32,
        "dropout": 0.0,
        "position": {"name": "learned"},
        "norm": {"name": "layernorm", "eps": 1e-5},
        "ffn": {"name": "gelu"},
        "name": "tiny-test",
    }
    cfg.update(overrides)
    return cfg


@pytest.fixture
def tiny_config() -> dict[str, Any]:
    """A fresh tiny decoder-only config dict (mutate freely)."""
    return tiny_model_dict()


@pytest.fixture
def make_tiny_config() -> Callable[..., dict[str, Any]]:
    """A factory: ``make_tiny_config(family="encoder_only", position={"name": "rope"})``."""
    return tiny_model_dict


@pytest.fixture
def conf_dir() -> Path:
    """Absolute path of the repository's Hydra ``conf/`` directory."""
    return CONF_DIR


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _hydra_runtime_restored() -> Any:
    """Hydra's runtime config is a process-wide singleton that in-process runs set
    (``HydraConfig.instance().set_config``); put back what the test found, so no test reads the
    run directory an earlier one left behind (the suite runs in random order: pytest-randomly)."""
    from hydra.core.hydra_config import HydraConfig

    before = HydraConfig.instance().cfg
    yield
    HydraConfig.instance().cfg = before


@pytest.fixture(autouse=True)
def _logging_handlers_restored() -> Any:
    """An in-process Hydra run configures logging (its job_logging: a stream handler on the
    stdout pytest captured for that test); put back the handlers the test found, so a later test's
    log records never go to a stream that pytest has closed since ("--- Logging error ---")."""
    import logging

    names = ("src", "hydra", "lightning.pytorch", "lightning.fabric")
    loggers = [logging.getLogger(), *(logging.getLogger(n) for n in names)]
    before = [(lg, list(lg.handlers), lg.level) for lg in loggers]
    yield
    for lg, handlers, level in before:
        lg.handlers[:] = handlers
        lg.setLevel(level)


# ---------------------------------------------------------------- runs of the entry points
# Fixtures (not module imports) so tests in any folder use them whatever the folders are called.

TINY_RUN = [  # a 2-layer 32-dim char-level GPT on the embedded corpus; 4 steps, validation every 2 on 2 batches
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


@pytest.fixture(scope="session")
def tiny_run() -> tuple[str, ...]:
    """Overrides of conf/train.yaml for a 4-step CPU run of a tiny model (``[*tiny_run, "seed=2"]``)."""
    return tuple(TINY_RUN)


@pytest.fixture(scope="session")
def run_entry_point(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Any]:
    """``run_entry_point("src.train", [overrides], cwd=...)``: the module as a user runs it, in a
    subprocess (offline, one thread, a private token cache); returns ``subprocess.CompletedProcess``."""
    import subprocess
    import sys

    cache = tmp_path_factory.mktemp("entry_point_cache")

    def run(
        module: str,
        args: list[str],
        cwd: Path,
        timeout: float = 600,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        full = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "OMP_NUM_THREADS": "1",
            "TRANSFORMER_LAB_CACHE": os.environ.get("TRANSFORMER_LAB_CACHE", str(cache)),
            "PYTHONPATH": str(REPO_ROOT),
            "WANDB_SILENT": "true",
            **(env or {}),
        }
        return subprocess.run(
            [sys.executable, "-m", module, *args],
            cwd=cwd,
            env=full,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run


def load_script(path: Path, name: str) -> Any:
    """A script outside the package (an experiment's ``table.py``) imported as module ``name``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
