"""Autoregressive decoding with the KV cache: greedy, temperature, top-k, top-p (nucleus).

Works for decoder-only models (continues ``input_ids``) and encoder-decoders (encodes
``input_ids`` once, decodes from ``decoder_start_token_id``). Returns the token ids of the
whole decoded sequence (prompt included for decoder-only, as transformers does).
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from src.models.components.kv_cache import KVCache
from src.models.families import TransformerModel
from src.models.families.encoder_decoder import EncoderDecoder
from src.models.families.encoder_only import EncoderOnly


class GenerationError(ValueError):
    """A generation argument out of range; the message names it, its value and the valid range."""


def check_generation_args(max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                          top_p: float | None = None) -> None:
    """``GenerationError`` unless 0 <= max_new_tokens, 0 <= temperature (0: greedy), top_k null or
    >= 0 (0: no filter) and top_p null or in (0, 1] (1: no filter); checked whether sampling or not."""
    def bad(key: str, value: object, fix: str) -> GenerationError:
        return GenerationError(f"{key}={value!r} is invalid: {fix}")

    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise bad("max_new_tokens", max_new_tokens, "the number of tokens to generate, 0 or more")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature < float("inf"):
        raise bad("temperature", temperature, "0 or more (0 = greedy; below 1 sharper, above 1 flatter)")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0):
        raise bad("top_k", top_k, "sample among the k most likely tokens, k >= 1 (null or 0: no top-k filter)")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1):
        raise bad("top_p", top_p, "the nucleus mass, in (0, 1] (null or 1: no top-p filter)")


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


def next_token(logits: Tensor, do_sample: bool, temperature: float, top_k: int | None, top_p: float | None,
               generator: torch.Generator | None) -> Tensor:
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
    tokens form the bidirectional prefix (usually the whole prompt). It matters for the prompt's
    forward only; every generated token sees all earlier ones anyway.

    ``on_token`` is called with each step's new tokens [B] (for streaming to a console).
    Rows that emitted ``eos_token_id`` are padded with it afterwards. A decoder-only model with a
    learned position table generates past the table's length from its last ``max_seq_len``
    tokens (no cache from then on), as nanoGPT does.
    """
    check_generation_args(max_new_tokens, temperature, top_k, top_p)  # GenerationError naming the argument
    if isinstance(model, EncoderOnly):
        raise ValueError("an encoder_only (masked LM) model cannot generate text; use a decoder_only or encoder_decoder model")
    was_training = model.training
    model.eval()
    B = input_ids.shape[0]
    is_seq2seq = isinstance(model, EncoderDecoder)
    memory = model.encode(input_ids, attention_mask) if is_seq2seq else None
    seq = model.start_tokens(B, input_ids.device) if is_seq2seq else input_ids
    n_layer = len(model.decoder.blocks)
    # A learned position table has no row past its end: a decoder-only model then keeps
    # generating from the last `window` tokens, without the cache (nanoGPT's idx[:, -block_size:]).
    window = None if is_seq2seq else model.decoder.position.max_positions
    max_len = seq.shape[1] + max_new_tokens
    if window is not None:
        max_len = min(max_len, window)
    cache = KVCache(n_layer, max_length=max_len) if use_cache else None
    finished = torch.zeros(B, dtype=torch.bool, device=input_ids.device)
    step_input = seq
    for _ in range(max_new_tokens):
        kwargs = {}
        if is_seq2seq:
            kwargs = dict(encoder_hidden_states=memory, attention_mask=attention_mask, decoder_input_ids=step_input if use_cache else seq)
            out = model(cache=cache, **kwargs)
        else:
            mask = attention_mask
            if mask is not None and seq.shape[1] > mask.shape[1]:  # extend padding mask over generated tokens
                mask = torch.cat([mask, mask.new_ones(B, seq.shape[1] - mask.shape[1])], dim=1)
            if window is not None and seq.shape[1] > window:  # past the table: slide the window, no cache
                cache, use_cache = None, False
                seq_in, mask = seq[:, -window:], None if mask is None else mask[:, -window:]
                prefix = None if prefix_length is None else (prefix_length - (seq.shape[1] - window)).clamp(min=0)
            else:
                seq_in, prefix = seq, prefix_length
            ids = step_input if use_cache else seq_in
            out = model(ids, attention_mask=mask, cache=cache, logits_to_keep=1,  # the head at the last position only
                        prefix_length=prefix)
        tok = next_token(out.logits[:, -1, :], do_sample, temperature, top_k, top_p, generator)  # [B]
        if eos_token_id is not None:
            tok = torch.where(finished, torch.full_like(tok, eos_token_id), tok)
            finished |= tok == eos_token_id
        seq = torch.cat([seq, tok[:, None]], dim=1)
        step_input = tok[:, None]
        if on_token is not None:
            on_token(tok)
        if eos_token_id is not None and bool(finished.all()):
            break
    model.train(was_training)
    return seq
