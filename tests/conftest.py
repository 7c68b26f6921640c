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

from pathlib import Path  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = REPO_ROOT / "conf"


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
