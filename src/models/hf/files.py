"""Checkpoint folders on disk: find one (local or Hub), read its config.json and tensors, write one.

Only config.json and tensors are read: no code from a checkpoint is ever run (no
``trust_remote_code``), and pickled ``.bin`` weights are opened with ``weights_only=True``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from src.errors import HFConversionError
from src.files import atomic_path


def resolve(name_or_path: str | Path) -> Path:
    """A local checkpoint directory, or a Hub repo downloaded (or found in the cache) by huggingface_hub."""
    path = Path(name_or_path)
    if path.is_dir():
        return path
    if path.exists():
        raise HFConversionError(f"{path} is a file; pass the checkpoint directory (config.json + weights)")
    from huggingface_hub import snapshot_download

    try:
        # weights in one file, or shards listed in an index (model-00001-of-00002.safetensors …)
        safetensors = ["config.json", "model.safetensors", "model.safetensors.index.json", "model-*-of-*.safetensors"]
        folder = Path(snapshot_download(str(name_or_path), allow_patterns=safetensors))
        if not any(folder.glob("model*.safetensors*")):  # older repos only have pickled weights
            pickled = ["config.json", "pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*-of-*.bin"]
            folder = Path(snapshot_download(str(name_or_path), allow_patterns=pickled))
    except Exception as e:  # offline, unknown repo, gated …
        raise HFConversionError(
            f"{str(name_or_path)!r} is not a local directory and could not be fetched from the Hugging Face Hub "
            f"({type(e).__name__}: {e}). Pass a directory holding config.json and model.safetensors / "
            f"pytorch_model.bin, or go online (HF_HUB_OFFLINE=0)"
        ) from e
    return folder


def read_config(folder: Path) -> dict[str, Any]:
    """The folder's config.json as a dict."""
    if not (folder / "config.json").exists():
        raise HFConversionError(f"{folder} has no config.json")
    return json.loads((folder / "config.json").read_text())


def read_tensors(folder: Path) -> dict[str, Tensor]:
    """model.safetensors (possibly sharded), else pytorch_model.bin (possibly sharded)."""
    from safetensors.torch import load_file

    def shards(index: Path) -> list[Path]:
        return [folder / f for f in sorted(set(json.loads(index.read_text())["weight_map"].values()))]

    if (folder / "model.safetensors").exists():
        files, load = [folder / "model.safetensors"], load_file
    elif (folder / "model.safetensors.index.json").exists():
        files, load = shards(folder / "model.safetensors.index.json"), load_file
    else:
        # weights_only=True: unpickling a .bin can run arbitrary code otherwise
        def load(p: Path) -> dict[str, Tensor]:
            return torch.load(p, map_location="cpu", weights_only=True)

        if (folder / "pytorch_model.bin").exists():
            files = [folder / "pytorch_model.bin"]
        elif (folder / "pytorch_model.bin.index.json").exists():
            files = shards(folder / "pytorch_model.bin.index.json")
        else:
            raise HFConversionError(
                f"{folder} has no model.safetensors, model.safetensors.index.json, pytorch_model.bin or "
                f"pytorch_model.bin.index.json (found: {sorted(p.name for p in folder.iterdir())})"
            )
    tensors: dict[str, Tensor] = {}
    for f in files:
        tensors.update(load(f))
    return tensors


def write_checkpoint(out_dir: str | Path, tensors: dict[str, Tensor], hf_config: Any) -> Path:
    """config.json (the transformers config object's ``save_pretrained``) + model.safetensors."""
    from safetensors.torch import save_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(out / "model.safetensors") as tmp:
        save_file(tensors, str(tmp), metadata={"format": "pt"})
    hf_config.save_pretrained(str(out))
    return out
