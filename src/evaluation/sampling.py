"""Sampling text from a loaded model with the KV cache (``python -m src.generate``): the checks on
the sampling arguments, the prompt as the model reads it (a continuation, or a source for an
encoder-decoder or a pair-trained decoder), and the console stream of the first sample.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import torch
from omegaconf import DictConfig
from torch import Tensor

from src.data.sources.base import file_kind
from src.data.tokenizers import Tokenizer
from src.errors import ConfigError
from src.evaluation.loading import load_model
from src.models.generation import check_generation_args, generate


class StreamPrinter:
    """``on_token`` callback that prints the text of row 0 as it grows.

    Tokens are decoded together (a BPE token can hold half of a UTF-8 character), and text
    is written only once it no longer ends in an incomplete character.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        write: Callable[[str], object] = sys.stdout.write,
        eos: int | None = None,
    ) -> None:
        self.tokenizer, self.write, self.eos = tokenizer, write, eos
        self.ids: list[int] = []
        self.printed = 0
        self.done = False

    def __call__(self, tokens: Tensor) -> None:
        tok = int(tokens[0])
        if self.done or tok == self.eos:
            self.done = True
            return
        self.ids.append(tok)
        text = self.tokenizer.decode(self.ids)
        if not text.endswith("\ufffd"):
            self.write(text[self.printed :])
            self.printed = len(text)
            sys.stdout.flush()


#: the most samples one run draws (they run as one batch)
MAX_SAMPLES = 4096


def check_args(cfg: DictConfig) -> None:
    """``ConfigError`` for a sampling argument out of range, ``num_samples`` below 1, or a
    ``prompt_file`` that is missing or a directory."""
    check_generation_args(cfg.max_new_tokens, cfg.temperature, cfg.top_k, cfg.top_p)
    n = cfg.num_samples
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(
            f"num_samples={n!r} is invalid: the number of continuations to sample, 1 or more"
        )
    # one batch: num_samples=1e9 was a MemoryError after building a [1e9, T] tensor
    if n > MAX_SAMPLES:
        raise ConfigError(
            f"num_samples={n} is over the limit of {MAX_SAMPLES}: every sample runs in one batch "
            "of [num_samples, prompt + max_new_tokens] tokens; sample in several runs with "
            f"different seed=... (num_samples={MAX_SAMPLES} or fewer each)"
        )
    if cfg.prompt_file:
        path = Path(str(cfg.prompt_file)).expanduser()
        if path.is_dir():
            raise ConfigError(
                f"prompt_file={path} is a directory, not a file; give a text file (or prompt=...)"
            )
        if not path.is_file():
            kind = file_kind(path)  # a FIFO or a device would block the read or never end
            raise ConfigError(
                f"prompt_file={path}: "
                f"{kind}{'' if kind == 'no such file' else ', not a regular file'}; give a text "
                "file (or prompt=...)"
            )


def sample(cfg: DictConfig, write: Callable[[str], object] = sys.stdout.write) -> list[str]:
    """Generate ``num_samples`` continuations of the prompt; returns their texts (new tokens
    only)."""
    check_args(cfg)  # before the model is loaded
    loaded = load_model(cfg.pretrained, cfg.ckpt_path, cfg.tokenizer, cfg.device, cfg.dtype)
    model, tok = loaded.model, loaded.tokenizer
    prompt = Path(cfg.prompt_file).read_text() if cfg.prompt_file else str(cfg.prompt)
    ids = tok.encode(prompt)
    is_seq2seq = model.prompt_is_source  # the prompt is a source; the output does not repeat it
    if loaded.pair_format is not None:  # trained on sentence pairs: the source as in training
        ids = ids + loaded.pair_format.source_suffix
    elif is_seq2seq and tok.eos_token_id is not None:
        ids = ids + [tok.eos_token_id]  # sources end with eos
    if not ids:
        if tok.eos_token_id is None:
            where = (
                f"prompt_file={cfg.prompt_file} holds no text"
                if cfg.prompt_file
                else f"prompt={prompt!r} is empty"
            )
            raise ConfigError(
                f"{where}, and the model's tokenizer ({tok.name}) has no end-of-text token to "
                "start from; give a prompt of at least one character, e.g. prompt='The'"
            )
        ids = [tok.eos_token_id]
    # decoder-only models past a learned table slide their window (generate)
    limit = model.config.max_seq_len
    input_ids = torch.tensor([ids] * cfg.num_samples, device=model.device)  # [N, T]
    generator = torch.Generator(device=model.device).manual_seed(int(cfg.seed))
    eos = tok.eos_token_id if cfg.stop_at_eos else None
    streamer = StreamPrinter(tok, write, eos) if cfg.stream else None
    if not is_seq2seq and loaded.pair_format is None:
        write(prompt)  # a continuation: show it after its prompt
    out = generate(
        model,
        input_ids,
        min(cfg.max_new_tokens, limit - 1) if is_seq2seq else cfg.max_new_tokens,
        do_sample=not cfg.greedy,
        temperature=float(cfg.temperature),
        top_k=cfg.top_k,
        top_p=cfg.top_p,
        eos_token_id=eos,
        generator=generator,
        on_token=streamer,  # a prefix-LM reads the prompt as its prefix
    )
    new = model.new_tokens(out, input_ids)
    texts = []
    for row in new.tolist():
        if eos is not None and eos in row:
            row = row[: row.index(eos)]
        texts.append(tok.decode(row))
    for i, text in enumerate(texts):
        if i == 0 and streamer is not None:
            write("\n")
            continue
        continuation = not is_seq2seq and loaded.pair_format is None
        write(
            ("" if i == 0 else f"\n---------- sample {i + 1}\n")
            + (prompt if continuation and i > 0 else "")
            + text
            + "\n"
        )
    return texts
