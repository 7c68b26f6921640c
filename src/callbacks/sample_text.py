"""Print (and save) a text sample from the trained model at the end of fitting."""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities import rank_zero_only

from src.echo import echo
from src.files import atomic_write
from src.models.generation import generate


def continue_text(
    model: torch.nn.Module, x: torch.Tensor, max_new_tokens: int, limit: int, **kw: object
) -> list[int]:
    """Generate ``max_new_tokens`` after ``x`` [1, T], cropping the context to the last ``limit``
    tokens as nanoGPT's ``generate`` does (in chunks of ``limit // 2`` new tokens, each with the KV
    cache)."""
    seq, new = x[:, -limit:], []
    chunk = max(1, limit // 2)
    while len(new) < max_new_tokens:
        n = min(chunk, max_new_tokens - len(new))
        ctx = seq[:, -(limit - n) :]
        step = model.new_tokens(generate(model, ctx, n, **kw), ctx)  # [1, n]
        new += step[0].tolist()
        seq = torch.cat([seq, step], dim=1)
    return new


class SampleText(pl.Callback):
    """After ``fit``, continue ``prompt`` with ``src.models.generation.generate`` (rank 0 only).

    The sample is printed and written to ``<output_dir>/samples.txt`` when ``output_dir`` is set.
    Encoder-only models cannot generate; they are skipped with a note.
    """

    def __init__(
        self,
        prompt: str = "\n",
        max_new_tokens: int = 200,
        temperature: float = 0.8,
        top_k: int | None = 50,
        seed: int = 0,
        output_dir: str | None = None,
    ) -> None:
        self.prompt, self.max_new_tokens = prompt, max_new_tokens
        self.temperature, self.top_k, self.seed = temperature, top_k, seed
        self.output_dir = output_dir
        self.text: str | None = None

    @rank_zero_only
    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        model, tok = getattr(pl_module, "model", None), getattr(pl_module, "tokenizer", None)
        if model is None or tok is None or not model.left_to_right:
            echo(
                "[sample] skipped: needs a generative model (decoder_only / encoder_decoder) and a "
                "tokenizer"
            )
            return
        ids = tok.encode(self.prompt) or [tok.eos_token_id if tok.eos_token_id is not None else 0]
        x = torch.tensor([ids], dtype=torch.long, device=pl_module.device)
        g = torch.Generator(device=pl_module.device).manual_seed(self.seed)
        kw = dict(
            do_sample=self.temperature > 0,
            temperature=self.temperature,
            top_k=self.top_k,
            generator=g,
        )
        limit = model.config.max_seq_len
        if model.prompt_is_source:  # the prompt is the source; the output is a new sequence
            src = x[:, -limit:]
            out = generate(model, src, min(self.max_new_tokens, limit - 1), **kw)
            self.text = f"{self.prompt} => {tok.decode(model.new_tokens(out, src)[0].tolist())}"
        else:
            self.text = self.prompt + tok.decode(
                continue_text(model, x, self.max_new_tokens, limit, **kw)
            )
        echo(
            f"\n----- sample (temperature {self.temperature}, top_k {self.top_k}) "
            f"-----\n{self.text}\n-----"
        )
        if self.output_dir:
            Path(self.output_dir).mkdir(parents=True, exist_ok=True)
            atomic_write(Path(self.output_dir) / "samples.txt", self.text)
