"""The GPT-2 pretraining recipes: their numbers as the references state them, the tokens per
step on any number of GPUs, and 2 real steps of each on a tiny model over prepared local data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

import src.training  # noqa: F401  (registers ${grad_accum:...}, ${device_precision:...})
from src.prepare import prepare

TINY_MODEL = [
    "model=tiny",
    "model.d_model=32",
    "model.n_layer=2",
    "model.n_head=2",
    "model.d_ff=64",
    "model.max_seq_len=32",
]


def compose_recipe(conf_dir: Path, name: str, tmp_path: Path, *extra: str) -> Any:
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = compose(
            "train",
            overrides=[
                f"experiment={name}",
                f"paths.output_dir={tmp_path}",
                f"paths.root_dir={tmp_path}",
                *extra,
            ],
        )
    GlobalHydra.instance().clear()
    return cfg


def tokens_per_step(cfg: Any, world: int) -> int:
    return cfg.batch_size * cfg.block_size * cfg.trainer.accumulate_grad_batches * world


@pytest.mark.parametrize(
    ("name", "tokens", "lr", "warmup", "decay"),
    [
        ("gpt2_owt", 491_520, 6e-4, 2000, 600_000),  # nanoGPT config/train_gpt2.py
        ("gpt2_fineweb", 524_288, 6e-4, 715, 19_073),  # build-nanogpt / llm.c GPT-2 124M
    ],
)
def test_recipe_numbers(
    conf_dir: Path, tmp_path: Path, name: str, tokens: int, lr: float, warmup: int, decay: int
) -> None:
    cfg = compose_recipe(conf_dir, name, tmp_path)
    assert cfg.model.name == "gpt2_small" and cfg.block_size == 1024
    assert (
        cfg.optim.lr == lr
        and list(cfg.optim.betas) == [0.9, 0.95]
        and cfg.optim.weight_decay == 0.1
    )
    assert (
        cfg.scheduler.warmup_steps == warmup
        and cfg.scheduler.decay_steps == decay
        and cfg.scheduler.min_lr == 6e-5
    )
    assert cfg.trainer.max_steps == decay and cfg.trainer.gradient_clip_val == 1.0
    # on this CPU: one process, all of it through accumulation
    assert tokens_per_step(cfg, 1) == tokens
    for gpus in (1, 8):
        with mock.patch.object(torch.cuda, "device_count", return_value=gpus):
            assert tokens_per_step(cfg, gpus) == tokens, gpus
    with pytest.raises(Exception, match="not a multiple"):
        OmegaConf.to_container(
            compose_recipe(conf_dir, name, tmp_path, "batch_size=7").trainer, resolve=True
        )


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """train.bin/val.bin of GPT-2 tokens from a small local text, as src.prepare writes them."""
    tmp = tmp_path_factory.mktemp("recipe_data")
    text = tmp / "corpus.txt"
    text.write_text(
        " ".join(
            f"Sentence {i} of a small corpus about rivers, bridges and towns." for i in range(400)
        )
    )
    return prepare(
        {
            "name": "text",
            "paths": [str(text)],
            "val_fraction": 0.1,
            "cache_dir": str(tmp / "cache"),
        },
        {"name": "gpt2"},
        out_dir=str(tmp / "bins"),
        num_proc=1,
    )


def _hellaswag(path: Path) -> Path:
    with path.open("w") as f:
        for i in range(8):
            ctx = f"A man walks to the river number {i} and then he"
            f.write(
                json.dumps(
                    {
                        "ind": i,
                        "activity_label": "Walking",
                        "ctx_a": ctx,
                        "ctx_b": "",
                        "ctx": ctx,
                        "endings": [
                            "swims.",
                            "sleeps on a bridge.",
                            "reads a book in town.",
                            "sings.",
                        ],
                        "label": str(i % 4),
                    }
                )
                + "\n"
            )
    return path


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2_owt", "gpt2_fineweb"])
def test_recipe_runs_two_steps_on_a_tiny_model(
    name: str, prepared: Path, tmp_path: Path, run_entry_point: Any
) -> None:
    run = tmp_path / "run"
    extra = (
        [
            f"callbacks.benchmarks.benchmarks.hellaswag.path={_hellaswag(tmp_path / 'hs.jsonl')}",
            "callbacks.benchmarks.every_n_steps=1",
        ]
        if name == "gpt2_fineweb"
        else []
    )
    r = run_entry_point(
        "src.train",
        [
            f"experiment={name}",
            *TINY_MODEL,
            f"data.dir={prepared}",
            "compile=false",
            "batch_size=2",
            "block_size=32",
            "trainer.max_steps=2",
            "trainer.accumulate_grad_batches=2",
            "trainer.val_check_interval=2",
            "trainer.limit_val_batches=1",
            "trainer.limit_test_batches=1",
            "callbacks.progress_bar=null",
            "trainer.enable_progress_bar=false",
            *extra,
            f"hydra.run.dir={run}",
        ],
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((run / "metrics.json").read_text())
    assert m["status"] == "completed" and m["global_step"] == 2
    assert m["tokens_seen"] == 2 * 2 * 2 * 32  # steps x accumulation x batch x block
    assert 0 < m["val/loss"] < 20
    if name == "gpt2_fineweb":  # HellaSwag on the live weights, as src.eval scores it
        assert 0.0 <= m["hellaswag/acc_norm"] <= 1.0 and "hellaswag/acc" in m
        rows = (run / "csv" / "version_0" / "metrics.csv").read_text()
        assert "hellaswag/acc_norm" in rows.splitlines()[0]
