"""Issue 21 item 12: absurd sizes in a checkpoint's stored config or a Hugging Face config.json
(vocab_size 1e9, n_layer 1e6 …) are refused against the weights stored with them, before anything is
allocated (``src.models.sizes``): one error naming the key, in well under a second, where they used to
end in a raw allocation error or minutes of building a million layers."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import torch

from src.checkpoints.load import load_checkpoint
from src.errors import CheckpointError, HFConversionError
from tests.training.conftest import TINY, train_in_process


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, token_cache: str) -> Path:
    run = tmp_path_factory.mktemp("run")
    train_in_process([*TINY, "trainer.max_steps=2", "test=false"], run)
    return run / "checkpoints" / "last.ckpt"


def _edited(trained: Path, tmp_path: Path, key: str, value: int) -> Path:
    ckpt = torch.load(trained, weights_only=True)
    ckpt["hyper_parameters"]["cfg"]["model"][key] = value
    ckpt.pop("integrity", None)  # a crafted file carries no content hash, or a recomputed one
    out = tmp_path / f"{key}.ckpt"
    torch.save(ckpt, out)
    return out


def test_the_trained_checkpoint_loads(trained: Path) -> None:
    assert load_checkpoint(trained).model is not None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("vocab_size", 10**9),
        ("n_layer", 10**6),
        ("d_ff", 10**9),
        ("max_seq_len", 10**9),
        ("d_model", 10**6),
    ],
)
def test_an_absurd_size_in_a_checkpoint_is_refused_before_building(
    trained: Path, tmp_path: Path, key: str, value: int
) -> None:
    path = _edited(trained, tmp_path, key, value)
    t0 = time.monotonic()
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    assert time.monotonic() - t0 < 5  # nothing built: a million layers took minutes before
    message = str(info.value)
    assert (
        str(path) in message
        and f"model.{key}={value}" in message
        and "nothing was built" in message
    )


def _hf_gpt2(folder: Path) -> Path:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(
        vocab_size=64,
        n_positions=32,
        n_embd=32,
        n_layer=2,
        n_head=4,
        bos_token_id=0,
        eos_token_id=1,
    )
    transformers.GPT2LMHeadModel(cfg).save_pretrained(folder)
    return folder


@pytest.mark.parametrize(
    ("hf_key", "key", "value"),
    [
        ("vocab_size", "vocab_size", 10**9),
        ("n_layer", "n_layer", 10**6),
        ("n_positions", "max_seq_len", 10**9),
        ("n_inner", "d_ff", 10**9),
    ],
)
def test_an_absurd_size_in_a_config_json_is_refused_before_building(
    tmp_path: Path, hf_key: str, key: str, value: int
) -> None:
    from src.models.hf import from_hf

    folder = _hf_gpt2(tmp_path / "gpt2")
    assert from_hf(folder).max_positions == 32  # as written: converts
    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    cfg = json.loads((bad / "config.json").read_text())
    cfg[hf_key] = value
    (bad / "config.json").write_text(json.dumps(cfg))
    t0 = time.monotonic()
    with pytest.raises(HFConversionError) as info:
        from_hf(bad)
    assert time.monotonic() - t0 < 30
    assert str(bad / "config.json") in str(info.value) and f"model.{key}={value}" in str(info.value)
