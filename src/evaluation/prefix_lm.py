"""Prefix-LM decoders (``model/mask=prefix_lm``) during generation: the prompt is the
bidirectional prefix (Raffel et al. 2020, §3.2.1)."""
from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from src.models.families import TransformerModel
from src.models.families.decoder_only import DecoderOnly


def is_prefix_lm(model: TransformerModel) -> bool:
    """A decoder-only model whose mask is not causal (a prefix LM needs ``prefix_length``)."""
    mask = model.decoder.mask if isinstance(model, DecoderOnly) else None
    return mask is not None and not mask.causal


@contextmanager
def prompt_prefix(model: TransformerModel, prompt_len: int, batch: int) -> Iterator[None]:
    """While generating, a prefix-LM decoder sees the whole prompt bidirectionally: every
    forward call gets ``prefix_length = prompt length`` (a no-op after the first step, where
    each new token sees all earlier ones anyway). ``generate`` has no ``prefix_length``
    argument, so the model's forward is wrapped for the duration; other models are untouched."""
    if not is_prefix_lm(model):
        yield
        return
    prefix = torch.full((batch,), prompt_len, dtype=torch.long, device=model.device)
    model.forward = functools.partial(type(model).forward, model, prefix_length=prefix)  # type: ignore[method-assign]
    try:
        yield
    finally:
        del model.forward  # back to the class's forward
