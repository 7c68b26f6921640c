"""The token ids a task reserves beyond the tokenizer's, and the decoder's start id (one rule for
every objective whose decoder reads its source through an encoder)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from src.data.tokenizers import Tokenizer


@dataclass
class SpecialIds:
    """Token ids a task needs beyond the tokenizer's, and how many were reserved.

    Reserved ids are appended after the tokenizer's vocabulary (``tokenizer.vocab_size``,
    ``+1`` …); ``model.vocab_size`` then grows by ``n_reserved`` (see ``src.training.setup``).
    """

    ids: dict[str, int | None] = field(default_factory=dict)
    n_reserved: int = 0

    def pick(self, name: str, *candidates: int | None, base: int) -> int:
        """The first non-None candidate, else a new reserved id ``base + n_reserved``."""
        for c in candidates:
            if c is not None:
                self.ids[name] = int(c)
                return int(c)
        self.ids[name] = base + self.n_reserved
        self.n_reserved += 1
        return self.ids[name]


def pick_decoder_start(
    ids: SpecialIds,
    objective_cfg: Mapping[str, Any],
    tokenizer: Tokenizer,
    model: Mapping[str, Any],
) -> None:
    """The start id of a decoder that reads its source through an encoder: ``objective``'s, else the
    model's, else the tokenizer's bos, pad or eos, else a reserved one (the one rule for every
    objective with such a decoder)."""
    ids.pick(
        "decoder_start_token_id",
        objective_cfg.get("decoder_start_token_id"),
        model.get("decoder_start_token_id"),
        tokenizer.bos_token_id,
        tokenizer.pad_token_id,
        tokenizer.eos_token_id,
        base=tokenizer.vocab_size,
    )


def decoder_start_override(objective_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The model key the resolved start id sets (the model shifts the labels right with it)."""
    start = objective_cfg.get("decoder_start_token_id")
    return {} if start is None else {"decoder_start_token_id": int(start)}
