"""Checkpoint folders on disk: find one (local or Hub), read its config.json and tensors, write one.

Only config.json and tensors are read: no code from a checkpoint is ever run (no
``trust_remote_code``), and pickled ``.bin`` weights are opened with ``weights_only=True``.
"""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from src.errors import HFConversionError
from src.files import atomic_path


def resolve(name_or_path: str | Path) -> Path:
    """A local checkpoint directory, or a Hub repo downloaded (or found in the cache) by
    huggingface_hub."""
    path = Path(name_or_path)
    if path.is_dir():
        return path
    if path.exists():
        raise HFConversionError(
            f"{path} is a file; pass the checkpoint directory (config.json + weights)"
        )
    from huggingface_hub import snapshot_download

    try:
        # weights in one file, or shards listed in an index (model-00001-of-00002.safetensors …)
        safetensors = [
            "config.json",
            "model.safetensors",
            "model.safetensors.index.json",
            "model-*-of-*.safetensors",
        ]
        folder = Path(snapshot_download(str(name_or_path), allow_patterns=safetensors))
        if not any(folder.glob("model*.safetensors*")):  # older repos only have pickled weights
            pickled = [
                "config.json",
                "pytorch_model.bin",
                "pytorch_model.bin.index.json",
                "pytorch_model-*-of-*.bin",
            ]
            folder = Path(snapshot_download(str(name_or_path), allow_patterns=pickled))
    except Exception as e:  # offline, unknown repo, gated …
        raise HFConversionError(
            f"{str(name_or_path)!r} is not a local directory and could not be fetched from the "
            f"Hugging Face Hub ({type(e).__name__}: {e}). Pass a directory holding config.json and "
            "model.safetensors / pytorch_model.bin, or go online (HF_HUB_OFFLINE=0)"
        ) from e
    return folder


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise HFConversionError(
            f"{path} cannot be read as JSON ({type(e).__name__}: {e}); the model directory is "
            "damaged or incomplete: download or copy it again"
        ) from None


#: transformers writes a non-finite float of a config as {"__float__": "Infinity"} (strict JSON has
#: none), e.g. Mamba-2's ``time_step_limit: [0.0, inf]``
FLOAT_TAGS = {"Infinity": float("inf"), "-Infinity": float("-inf"), "NaN": float("nan")}


def decode_float_tags(obj: Any) -> Any:
    """``obj`` with each ``{"__float__": tag}`` of transformers' config.json replaced by its float."""
    if isinstance(obj, dict):
        if set(obj) == {"__float__"} and obj["__float__"] in FLOAT_TAGS:
            return FLOAT_TAGS[obj["__float__"]]
        return {k: decode_float_tags(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode_float_tags(v) for v in obj]
    return obj


def read_config(folder: Path) -> dict[str, Any]:
    """The folder's config.json as a dict (transformers' non-finite float tags decoded)."""
    if not (folder / "config.json").exists():
        raise HFConversionError(f"{folder} has no config.json")
    config = _read_json(folder / "config.json")
    if not isinstance(config, dict):
        raise HFConversionError(
            f"{folder / 'config.json'} holds a JSON {type(config).__name__}, not an object"
        )
    return decode_float_tags(config)


def _load_safetensors(path: Path) -> dict[str, Tensor]:
    """One safetensors file; a header that lies (shapes, dtypes or offsets past the end) or a cut
    file is an ``HFConversionError`` naming it (safetensors raises its own ``SafetensorError``)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError) as e:
        raise HFConversionError(
            f"{path} is not a valid safetensors file ({type(e).__name__}: {e}): its header does "
            "not match its data, or the file is cut short; download or copy it again"
        ) from None


def _load_pickled(path: Path) -> dict[str, Tensor]:
    """One pickled ``.bin``, with ``weights_only=True`` (unpickling anything else can run code).
    torch's own refusal advises ``weights_only=False``, which this project never does: the error
    says what to do instead."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        found = re.search(r"GLOBAL (\S+)", str(e))
        what = f"a Python object ({found.group(1)})" if found else "Python objects"
        raise HFConversionError(
            f"{path} holds {what} besides tensors; unpickling it could run code, so it is never "
            "loaded with weights_only=False here. Use the model's model.safetensors, or convert "
            "the file to safetensors on a machine where you trust it"
        ) from None
    except (RuntimeError, OSError, EOFError) as e:  # a torn zip: PytorchStreamReader failed …
        raise HFConversionError(
            f"{path} cannot be read as a PyTorch weights file ({type(e).__name__}: "
            f"{str(e).splitlines()[0]}); download or copy it again"
        ) from None


def read_tensors(folder: Path) -> dict[str, Tensor]:
    """model.safetensors (possibly sharded), else pytorch_model.bin (possibly sharded)."""

    def shards(index: Path) -> list[Path]:
        data = _read_json(index)
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict) or not all(
            isinstance(f, str) and "/" not in f for f in weight_map.values()
        ):
            raise HFConversionError(
                f"{index} has no weight_map of tensor name -> shard file in this directory"
            )
        return [folder / f for f in sorted(set(weight_map.values()))]

    if (folder / "model.safetensors").exists():
        files, load = [folder / "model.safetensors"], _load_safetensors
    elif (folder / "model.safetensors.index.json").exists():
        files, load = shards(folder / "model.safetensors.index.json"), _load_safetensors
    else:
        load = (
            _load_pickled  # weights_only=True: unpickling a .bin can run arbitrary code otherwise
        )
        if (folder / "pytorch_model.bin").exists():
            files = [folder / "pytorch_model.bin"]
        elif (folder / "pytorch_model.bin.index.json").exists():
            files = shards(folder / "pytorch_model.bin.index.json")
        else:
            raise HFConversionError(
                f"{folder} has no model.safetensors, model.safetensors.index.json, "
                "pytorch_model.bin or pytorch_model.bin.index.json (found: "
                f"{sorted(p.name for p in folder.iterdir())})"
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
