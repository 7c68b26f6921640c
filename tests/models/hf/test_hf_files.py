"""Issue 21 item 14 (model directories): a safetensors file whose header lies, a pickled ``.bin`` holding a
Python object (torch's own refusal advises ``weights_only=False``), a torn ``config.json``, and a tokenizer
whose ``tokenizer_config.json`` names custom code (transformers advises ``trust_remote_code=True``) are one
error naming the file and what to do instead; nothing is ever loaded unsafely."""

from __future__ import annotations

import argparse
import json
import shutil
import struct
from pathlib import Path

import pytest
import torch

from src.errors import ConfigError, HFConversionError

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
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
    folder = tmp_path_factory.mktemp("gpt2")
    transformers.GPT2LMHeadModel(cfg).save_pretrained(folder)
    return folder


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def _from_hf_error(folder: Path) -> str:
    from src.models.hf import from_hf

    with pytest.raises(HFConversionError) as info:
        from_hf(folder)
    return str(info.value)


def test_the_directory_converts(gpt2_dir: Path) -> None:
    from src.models.hf import from_hf

    assert from_hf(gpt2_dir).config.n_layer == 2


def test_a_safetensors_header_that_lies_is_named(gpt2_dir: Path, tmp_path: Path) -> None:
    folder = _copy(gpt2_dir, tmp_path / "lie")
    path = folder / "model.safetensors"
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    name = next(k for k in header if k != "__metadata__")
    header[name]["data_offsets"][1] += 10**9  # claims a gigabyte the file does not hold
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + n :])
    message = _from_hf_error(folder)
    assert str(path) in message and "not a valid safetensors file" in message


def test_a_pickled_bin_with_a_python_object_is_refused_without_unpickling_it(
    gpt2_dir: Path, tmp_path: Path
) -> None:
    from safetensors.torch import load_file

    folder = tmp_path / "pickled"
    folder.mkdir()
    shutil.copy(gpt2_dir / "config.json", folder / "config.json")
    torch.save(
        {"args": argparse.Namespace(lr=1), **load_file(gpt2_dir / "model.safetensors")},
        folder / "pytorch_model.bin",
    )
    message = _from_hf_error(folder)
    assert str(folder / "pytorch_model.bin") in message and "argparse.Namespace" in message
    assert "never loaded with weights_only=False" in message and "safetensors" in message


def test_a_torn_config_json_is_named(gpt2_dir: Path, tmp_path: Path) -> None:
    folder = _copy(gpt2_dir, tmp_path / "torn")
    (folder / "config.json").write_text((folder / "config.json").read_text()[:50])
    message = _from_hf_error(folder)
    assert str(folder / "config.json") in message and "cannot be read as JSON" in message


def test_a_tokenizer_with_auto_map_is_refused_before_transformers_reads_it(tmp_path: Path) -> None:
    from src.data.tokenizers import build_tokenizer

    folder = tmp_path / "tok"
    shutil.copytree(
        Path(__file__).resolve().parents[3] / "experiments" / "03_families" / "tokenizer", folder
    )
    # as committed: loads
    assert build_tokenizer({"name": "hf", "path": str(folder)}).vocab_size > 0
    config = folder / "tokenizer_config.json"
    node = json.loads(config.read_text())
    node.update(
        auto_map={"AutoTokenizer": ["custom.CustomTokenizer", None]},
        tokenizer_class="CustomTokenizer",
    )
    config.write_text(json.dumps(node))
    with pytest.raises(ConfigError) as info:
        build_tokenizer({"name": "hf", "path": str(folder)})
    message = str(info.value)
    assert (
        f"tokenizer.path='{folder}'" in message and str(config) in message and "auto_map" in message
    )
    assert "trust_remote_code stays false" in message
