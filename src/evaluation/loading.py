"""One way to get a model and its tokenizer for evaluation and generation:
``pretrained=<hub name | transformers directory>`` or ``ckpt_path=<our checkpoint>``.

Tokenizer of a pretrained model: a transformers GPT-2 (``model_type: gpt2`` with the
50,257-token vocabulary) uses our offline tiktoken GPT-2 BPE, which is byte-identical to
the Hugging Face one and needs no tokenizer files; any other model uses the Hugging Face
tokenizer stored beside it. A checkpoint carries its own tokenizer. ``tokenizer=...``
overrides both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from src.data.tokenizers import Tokenizer, build_tokenizer
from src.errors import ConfigError
from src.models.families import TransformerModel

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}
GPT2_VOCAB_SIZE = 50257
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
    "spiece.model",
    "source.spm",
    "vocab.txt",
)


@dataclass
class PairFormat:
    """How a model trained on sentence pairs reads a source: its tokens, then ``source_suffix``
    (``src eos`` for an encoder-decoder; ``src eos <sep>`` for a decoder-only
    ``decoder_translation`` model, which then writes the target)."""

    source_suffix: list[int]


@dataclass
class LoadedModel:
    model: TransformerModel
    tokenizer: Tokenizer
    source: str  # "pretrained=gpt2" or "ckpt_path=…", for reports
    # the checkpoint's training config (empty for pretrained)
    train_cfg: dict[str, Any] = field(default_factory=dict)
    pair_format: PairFormat | None = None  # set for checkpoints trained on sentence pairs
    mask_token_id: int | None = (
        None  # [MASK] of a masked LM (the tokenizer's, or the id training reserved)
    )


def pair_format(train_cfg: Mapping[str, Any], tokenizer: Tokenizer) -> PairFormat | None:
    """The source format of a checkpoint trained on pairs (src.data.pairs: both sides end
    with eos; src.objectives.decoder_translation: ``src <sep> tgt``), else None."""
    task = dict(train_cfg.get("objective") or {})
    eos = tokenizer.eos_token_id
    if eos is None:
        return None
    if task.get("name") == "decoder_translation" and task.get("sep_token_id") is not None:
        return PairFormat([eos, int(task["sep_token_id"])])
    if task.get("name") == "seq2seq":
        return PairFormat([eos])
    return None


def resolve_device(device: str | None) -> torch.device:
    """'auto' -> cuda when available, else cpu."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resolve_dtype(dtype: str | None) -> torch.dtype:
    if dtype is None:
        return torch.float32
    if dtype not in DTYPES:
        raise ValueError(f"dtype='{dtype}' is not known; use one of {sorted(DTYPES)}")
    return DTYPES[dtype]


def _hf_config(name_or_path: str) -> dict[str, Any]:
    """config.json of a local directory, or of a hub model (cached / downloaded)."""
    folder = Path(name_or_path).expanduser()
    if folder.is_dir():
        cfg_file = folder / "config.json"
        if not cfg_file.is_file():
            raise FileNotFoundError(
                f"pretrained='{name_or_path}' has no config.json; is it a transformers model "
                "directory?"
            )
        return json.loads(cfg_file.read_text())
    from huggingface_hub import hf_hub_download

    try:
        return json.loads(Path(hf_hub_download(name_or_path, "config.json")).read_text())
    except Exception as e:  # offline, unknown repo …
        raise FileNotFoundError(
            f"pretrained='{name_or_path}' is not a local directory and its config.json could not "
            f"be fetched ({type(e).__name__}: {e}); pass a transformers directory, or go online"
        ) from None


def pretrained_tokenizer(name_or_path: str) -> Tokenizer:
    """The tokenizer that belongs to a transformers model (see module docstring)."""
    cfg = _hf_config(name_or_path)
    if cfg.get("model_type") == "gpt2" and cfg.get("vocab_size") == GPT2_VOCAB_SIZE:
        return build_tokenizer({"name": "gpt2"})
    folder = Path(name_or_path).expanduser()
    if folder.is_dir() and not any((folder / f).exists() for f in _TOKENIZER_FILES):
        raise FileNotFoundError(
            f"pretrained='{name_or_path}' holds no tokenizer files "
            f"({', '.join(_TOKENIZER_FILES)}); save the tokenizer beside the model, or name one: "
            f"tokenizer={{name: hf, path: <dir or hub name>}} (or tokenizer={{name: gpt2}})"
        )
    return build_tokenizer({"name": "hf", "path": str(name_or_path)})


def load_model(
    pretrained: str | None = None,
    ckpt_path: str | None = None,
    tokenizer: Mapping[str, Any] | None = None,
    device: str | None = "auto",
    dtype: str | None = "float32",
) -> LoadedModel:
    """Exactly one of ``pretrained`` / ``ckpt_path`` -> model (eval mode, on ``device``) and
    tokenizer."""
    if (pretrained is None) == (ckpt_path is None):
        raise ConfigError(
            "set exactly one of pretrained=<hub name or transformers directory> (e.g. "
            "pretrained=gpt2) or ckpt_path=<checkpoint .ckpt>"
            + (
                f"; got both (pretrained={pretrained}, ckpt_path={ckpt_path})"
                if pretrained and ckpt_path
                else ""
            )
        )
    train_cfg: dict[str, Any] = {}
    if ckpt_path is not None:
        from src.checkpoints.load import load_checkpoint

        # CheckpointError: a directory, missing, unsafe …
        loaded = load_checkpoint(str(Path(ckpt_path).expanduser()))
        model, tok, source = loaded.model, loaded.tokenizer, f"ckpt_path={ckpt_path}"
        # the task gave the model its resolved special ids (model_overrides)
        train_cfg = dict(loaded.cfg or {})
    else:
        from src.models.hf import from_hf

        model = from_hf(str(pretrained))
        tok, source = (
            (None if tokenizer else pretrained_tokenizer(str(pretrained))),
            f"pretrained={pretrained}",
        )
    if tokenizer:
        tok = build_tokenizer(dict(tokenizer))
    assert tok is not None
    if tok.vocab_size > model.config.vocab_size:
        raise ValueError(
            f"the tokenizer has {tok.vocab_size} tokens but the model only "
            f"{model.config.vocab_size}; choose the tokenizer the model was trained with "
            "(tokenizer=...)"
        )
    model = model.to(device=resolve_device(device), dtype=resolve_dtype(dtype)).eval()
    mask_id = (train_cfg.get("objective") or {}).get("mask_token_id", tok.mask_token_id)
    return LoadedModel(
        model=model,
        tokenizer=tok,
        source=source,
        train_cfg=train_cfg,
        pair_format=pair_format(train_cfg, tok) if train_cfg else None,
        mask_token_id=mask_id,
    )
