"""``data.document_mask`` checked against the run (issue 59): document masking needs packed text
windows whose documents the token cache ended with eos, read by a causal LM.

Every registered position scheme restarts exactly at a document's start: absolute ones (learned,
sinusoidal) are given positions restarting at 0, relative ones (RoPE, ALiBi, T5 bias) score i - j
only, which is the same inside a packed document as for the document alone. The one exception:
RoPE with ``model/sinks=token``, whose unrotated sink keys see a query's absolute rotation. Generation is not document-masked: a generated sequence is one document.
"""

from __future__ import annotations

import logging
from typing import Any

from src.errors import ConfigError

log = logging.getLogger(__name__)


def check_document_mask(
    value: Any,
    *,
    kind: str,
    source: str,
    separate: Any,
    objective: str | None,
    position: str = "learned",
    sinks: str = "none",
) -> None:
    """value: ``data.document_mask``; kind: the source's kind (lm, bin, pairs, synthetic);
    separate: its ``separate_documents``; objective: ``objective.name``; position, sinks: the
    model's ``model/position`` and ``model/sinks`` names."""
    if not isinstance(value, bool):
        raise ConfigError(
            f"data.document_mask={value!r} must be true or false (true: a query of a packed "
            "window attends only within its own document)"
        )
    if not value:
        return
    if kind == "synthetic":
        log.info(
            "data.document_mask=true on data=%s changes nothing: each row holds one example",
            source,
        )
        return
    if kind == "pairs":
        raise ConfigError(
            f"data.document_mask=true needs packed text windows, but data={source} gives one "
            "source/target pair per row: set data.document_mask=false"
        )
    if separate is False:
        raise ConfigError(
            f"data.document_mask=true needs document boundaries, but data={source} is one text "
            "with no eos between documents (separate_documents: false): set "
            "data.document_mask=false, or use a source with documents (e.g. data=embedded)"
        )
    if position == "rope" and sinks == "token":
        # the sink keys take no rotation, so a query's score on them depends on its absolute
        # RoPE position, which the stack does not restart (RoPE is relative otherwise)
        raise ConfigError(
            "data.document_mask=true with model/position=rope cannot restart positions before "
            "model/sinks=token (unrotated sink keys read a query's absolute position): use "
            "model/sinks=learned or model/position=alibi, or set data.document_mask=false"
        )
    if objective != "causal_lm":
        raise ConfigError(
            f"data.document_mask=true applies to objective=causal_lm (a decoder over packed "
            f"windows), not objective={objective}: set data.document_mask=false"
        )
