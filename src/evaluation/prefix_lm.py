"""Prefix-LM decoders (``model/mask=prefix_lm``) during generation: the prompt is the
bidirectional prefix (Raffel et al. 2020, §3.2.1)."""
from __future__ import annotations

import torch

from src.models.families import TransformerModel
from src.models.families.decoder_only import DecoderOnly


def is_prefix_lm(model: TransformerModel) -> bool:
    """A decoder-only model whose mask is not causal (a prefix LM needs ``prefix_length``)."""
    mask = model.decoder.mask if isinstance(model, DecoderOnly) else None
    return mask is not None and not mask.causal


def prompt_prefix(model: TransformerModel, prompt_len: int, batch: int) -> torch.Tensor | None:
    """``prefix_length`` for ``generate``: a prefix-LM decoder sees the whole prompt
    bidirectionally (None for every other model)."""
    if not is_prefix_lm(model):
        return None
    return torch.full((batch,), prompt_len, dtype=torch.long, device=model.device)
