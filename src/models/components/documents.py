"""Document masking for packed sequences (``data.document_mask=true``).

A training window of packed text holds several documents, each ended by the tokenizer's eos (the
token cache writes one after every document of a source with ``separate_documents``). With
document masking a query attends only within its own document, and positions restart at each
document's start, so each document is read as if it were alone. The eos belongs to the document
it ends, as in Llama 3 (Dubey et al. 2024, §3.2: "a mask that prevents self-attention between
different documents within the same sequence") and torchtitan's document masking (its
``create_block_document_causal_mask`` starts a document after each eos). A window cut in the
middle of a document starts with that document's tail, read as its own document.

Computed once per batch: the ids and positions here in the objective and the stack, the
block-diagonal mask [B, 1, T, T] AND-ed with each layer's own mask in ``build_bias``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor


def document_ids(input_ids: Tensor, eos_id: int) -> Tensor:
    """[B, T] token ids -> [B, T] document index of each token (0, 1, …); an eos ends its
    document (it carries that document's id, the next token starts the next one)."""
    is_eos = (input_ids == eos_id).long()  # [B, T]
    return is_eos.cumsum(dim=1) - is_eos  # [B, T]: eos strictly before each token


def document_positions(doc_ids: Tensor) -> Tensor:
    """[B, T] document ids -> [B, T] positions restarting at 0 at each document's start."""
    B, T = doc_ids.shape
    idx = torch.arange(T, device=doc_ids.device).expand(B, T)  # [B, T]
    new = torch.ones_like(doc_ids, dtype=torch.bool)  # [B, T]: a document starts here
    new[:, 1:] = doc_ids[:, 1:] != doc_ids[:, :-1]
    start = torch.where(new, idx, torch.zeros_like(idx)).cummax(dim=1).values  # [B, T]
    return idx - start  # [B, T]


def same_document(doc_ids: Tensor) -> Tensor:
    """[B, T] document ids -> boolean [B, 1, T, T]: query i may see key j of its own document."""
    return (doc_ids[:, :, None] == doc_ids[:, None, :])[:, None]  # [B, T, T] -> [B, 1, T, T]


def document_mask_of(data: Mapping[str, Any] | None) -> bool:
    """Whether the run's data node asks for document masking (``data.document_mask``, default
    false; checked in src/config/document_mask.py)."""
    return bool((data or {}).get("document_mask", False))
