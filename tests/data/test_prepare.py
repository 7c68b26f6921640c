"""``python -m src.prepare``: nanoGPT-style train.bin/val.bin that round-trip and that training reads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from src.data.cache import read_meta
from src.data.datamodule import build_datamodule
from src.data.tokenizers import build_tokenizer
from src.errors import DataError
from src.prepare import prepare


def run_prepare(conf_dir: Path, overrides: list[str]) -> Path:
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = compose(config_name="prepare", overrides=overrides)
    data = OmegaConf.to_container(cfg.data, resolve=True)
    return prepare(
        data, OmegaConf.to_container(cfg.tokenizer), cfg.out_dir, cfg.num_proc, cfg.overwrite
    )


def test_openwebtext_recipe_on_a_local_text_round_trips(
    conf_dir: Path, small_text: Path, tmp_path: Path, cache_dir: str
) -> None:
    out = run_prepare(
        conf_dir,
        [
            "data=openwebtext",
            f"data.dir={tmp_path / 'owt'}",
            f"data.cache_dir={cache_dir}",
            f"data.raw={{name:text,paths:[{small_text}],val_fraction:0.1,test_fraction:0.1}}",
        ],
    )
    assert out == tmp_path / "owt" and {p.name for p in out.iterdir()} == {
        "train.bin",
        "val.bin",
        "test.bin",
        "meta.json",
    }
    meta = read_meta(out)
    assert meta["dtype"] == "uint16" and meta["tokenizer"] == {"name": "gpt2"}
    tok = build_tokenizer({"name": "gpt2"})
    text = small_text.read_text()
    a, b = int(len(text) * 0.8), int(len(text) * 0.9)  # [train | val | test] by characters
    train, val, test = (
        np.memmap(out / f"{s}.bin", dtype=np.uint16, mode="r") for s in ("train", "val", "test")
    )
    # one document: eos at its end
    assert len(train) == meta["tokens"]["train"] and train[-1] == tok.eos_token_id
    assert (
        tok.decode(train[:-1].tolist()) == text[:a] and tok.decode(val[:-1].tolist()) == text[a:b]
    )
    assert tok.decode(test[:-1].tolist()) == text[b:]

    # training reads the prepared bins through np.memmap
    dm = build_datamodule(
        {"name": "openwebtext", "dir": str(out), "cache_dir": cache_dir},
        tok,
        block_size=32,
        batch_size=3,
        seed=0,
    )
    dm.prepare_tokenizer(), dm.prepare_data(), dm.setup("fit")
    assert isinstance(dm.tokens["train"], np.memmap)
    b = next(iter(dm.train_dataloader()))["tokens"]
    assert b.shape == (3, 33)
    starts = [i for i in range(len(train) - 32) if np.array_equal(train[i : i + 33], b[0].numpy())]
    assert starts, "a training window is a slice of train.bin"


def test_hf_datasets_map_with_processes(
    conf_dir: Path, small_text: Path, tmp_path: Path, cache_dir: str
) -> None:
    out = run_prepare(
        conf_dir,
        [
            "data=hf",
            "data.path=text",
            f"data.data_files={{train:[{small_text}]}}",
            "data.val_fraction=0.2",
            "data.test_fraction=0.2",
            f"data.cache_dir={cache_dir}",
            "num_proc=2",
            f"out_dir={tmp_path / 'hf'}",
        ],
    )
    meta = read_meta(out)
    lines = small_text.read_text().splitlines()
    assert meta["tokens"]["train"] + meta["tokens"]["val"] + meta["tokens"]["test"] == sum(
        len(build_tokenizer({"name": "gpt2"}).encode(s)) + 1 for s in lines
    )
    dm = build_datamodule(
        {"name": "bin", "dir": str(out)},
        build_tokenizer({"name": "gpt2"}),
        block_size=16,
        batch_size=2,
        seed=0,
    )
    dm.setup("fit")
    assert next(iter(dm.val_dataloader()))["tokens"].shape == (2, 17)


def test_prepare_fills_the_cache_training_uses(
    conf_dir: Path, small_text: Path, cache_dir: str
) -> None:
    out = run_prepare(
        conf_dir,
        [
            "data=text",
            f"data.paths=[{small_text}]",
            f"data.cache_dir={cache_dir}",
            "tokenizer=char",
        ],
    )
    tok = build_tokenizer({"name": "char"})
    dm = build_datamodule(
        {"name": "text", "paths": [str(small_text)], "cache_dir": cache_dir},
        tok,
        block_size=8,
        batch_size=2,
        seed=0,
    )
    assert dm.token_dir == out
    dm.prepare_tokenizer()
    assert tok.chars == "".join(sorted(set(small_text.read_text())))


def test_missing_bins_say_to_run_prepare(tmp_path: Path) -> None:
    dm = build_datamodule(
        {"name": "openwebtext", "dir": str(tmp_path)},
        build_tokenizer({"name": "gpt2"}),
        block_size=8,
        batch_size=2,
        seed=0,
    )
    with pytest.raises(DataError) as e:
        dm.setup("fit")
    assert str(e.value) == (
        f"data.dir='{tmp_path}' has no train.bin; run the one-time step first: python -m src.prepare data=openwebtext "
        "(it tokenizes the corpus into train.bin/val.bin there), or point data.dir at a prepared directory"
    )


def test_tokenizer_mismatch_is_refused(
    conf_dir: Path, small_text: Path, tmp_path: Path, cache_dir: str
) -> None:
    out = run_prepare(
        conf_dir,
        [
            "data=bin",
            f"data.dir={tmp_path / 'b'}",
            f"data.raw={{name:text,paths:[{small_text}]}}",
            f"data.cache_dir={cache_dir}",
        ],
    )
    tok = build_tokenizer({"name": "char", "chars": "abc"})
    dm = build_datamodule({"name": "bin", "dir": str(out)}, tok, block_size=8, batch_size=2, seed=0)
    with pytest.raises(DataError, match="was tokenized with"):
        dm.setup("fit")


@pytest.mark.slow
def test_cli(small_text: Path, tmp_path: Path) -> None:
    """The Hydra entry point itself (a subprocess; slow because of the interpreter start)."""
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "src.prepare",
            "data=bin",
            f"data.dir={tmp_path / 'cli'}",
            f"data.raw={{name:text,paths:[{small_text}]}}",
            f"data.cache_dir={tmp_path / 'c'}",
        ],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "cli" / "train.bin").is_file()
