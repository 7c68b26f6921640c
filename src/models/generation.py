"""Autoregressive decoding with the KV cache: greedy, temperature, top-k, top-p (nucleus).

The loop is the same for every family; the family prepares the prompt and runs one step
(``start_decoding`` / ``decode_step``): a decoder-only model continues ``input_ids``, an
encoder-decoder encodes them once and decodes from its start token. Returns the token ids of
the whole decoded sequence (the prompt included for decoder-only, as transformers does);
``model.new_tokens(sequences, input_ids)`` gives the generated part.

A layer whose token mixer is recurrent (``model/mixer``) keeps its state in the same cache
(``KVCache.states``) and continues from it one token at a time; the loop does not change.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from src.errors import ConfigError
from src.models.families import TransformerModel


def check_generation_args(
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> None:
    """``ConfigError`` unless 0 <= max_new_tokens, 0 <= temperature (0: greedy), top_k null or >= 0
    (0: no filter) and top_p null or in (0, 1] (1: no filter); checked whether sampling or not."""
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, int)
        or max_new_tokens < 0
    ):
        raise ConfigError(
            f"max_new_tokens={max_new_tokens!r} is invalid: the number of tokens to generate, 0 or "
            "more"
        )
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not 0 <= temperature < float("inf")
    ):
        raise ConfigError(
            f"temperature={temperature!r} is invalid: 0 or more (0 = greedy; below 1 sharper, "
            "above 1 flatter)"
        )
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0):
        raise ConfigError(
            f"top_k={top_k!r} is invalid: sample among the k most likely tokens, k >= 1 (null or "
            "0: no top-k filter)"
        )
    if top_p is not None and (
        isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1
    ):
        raise ConfigError(
            f"top_p={top_p!r} is invalid: the nucleus mass, in (0, 1] (null or 1: no top-p filter)"
        )


def filter_logits(logits: Tensor, top_k: int | None = None, top_p: float | None = None) -> Tensor:
    """logits [B, V] -> logits with the tokens outside top-k / the top-p nucleus set to -inf."""
    if top_k is not None and top_k > 0:
        kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]  # [B, 1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and 0.0 < top_p < 1.0:
        sorted_logits, idx = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(-1)
        cum = probs.cumsum(-1)
        drop = cum - probs > top_p  # keep the smallest prefix whose mass reaches top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, idx, sorted_logits)
    return logits


def next_token(
    logits: Tensor,
    do_sample: bool,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    generator: torch.Generator | None,
) -> Tensor:
    """logits [B, V] -> token ids [B]."""
    if not do_sample or temperature == 0.0:
        return logits.argmax(dim=-1)
    logits = filter_logits(logits.float() / temperature, top_k, top_p)
    return torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(-1)


@torch.inference_mode()
def generate(
    model: TransformerModel,
    input_ids: Tensor,
    max_new_tokens: int,
    *,
    attention_mask: Tensor | None = None,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_token_id: int | None = None,
    use_cache: bool = True,
    generator: torch.Generator | None = None,
    on_token: Callable[[Tensor], None] | None = None,
    prefix_length: Tensor | None = None,
) -> Tensor:
    """input_ids [B, T] -> [B, T + new] (decoder-only) or [B, 1 + new] (encoder-decoder).

    ``prefix_length`` [B]: for a prefix-LM decoder (``model/mask=prefix_lm``), how many prompt
    tokens form the bidirectional prefix (default: the whole prompt). It matters for the
    prompt's forward only; every generated token sees all earlier ones anyway.

    ``on_token`` is called with each step's new tokens [B] (for streaming to a console).
    Rows that emitted ``eos_token_id`` are padded with it afterwards. A decoder-only model with a
    learned position table generates past the table's length from its last ``max_seq_len``
    tokens (no cache from then on), as nanoGPT does.
    """
    # ConfigError naming the argument
    check_generation_args(max_new_tokens, temperature, top_k, top_p)
    was_training = model.training
    model.eval()
    try:
        d = model.start_decoding(
            input_ids,
            max_new_tokens,
            attention_mask=attention_mask,
            prefix_length=prefix_length,
            use_cache=use_cache,
        )
        finished = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        for _ in range(max_new_tokens):
            # [B]
            tok = next_token(model.decode_step(d), do_sample, temperature, top_k, top_p, generator)
            if eos_token_id is not None:
                tok = torch.where(finished, torch.full_like(tok, eos_token_id), tok)
                finished |= tok == eos_token_id
            d.append(tok)
            if on_token is not None:
                on_token(tok)
            if eos_token_id is not None and bool(finished.all()):
                break
    finally:
        model.train(was_training)
    return d.sequences
