"""``data=selective_copy``: ``data.num_tokens`` content tokens scattered among noise tokens in a
sequence of ``data.length``; the answer is the content in order.

::

    prompt  . . 7 . . 2 . 9 . . 2 . |        answer 7 2 9 2      (length 12, num_tokens 4)

Gu & Dao 2023, "Mamba: Linear-Time Sequence Modeling with Selective State Spaces"
(arXiv:2312.00752), §3.1 and Table 1: the positions of the content vary, so a model must select
by content, not by a fixed offset. Content symbols are drawn from ``data.alphabet``; the noise
symbol ``.`` is never content.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from src.data.sources import SOURCES
from src.data.synthetic.base import (
    NOISE,
    SEP,
    SYMBOLS,
    Example,
    SyntheticSource,
    fail,
    integer,
    symbol,
)


@SOURCES.register("selective_copy")
class SelectiveCopy(SyntheticSource):
    length_key: ClassVar[str] = "length"
    min_length: ClassVar[int] = 1
    paper: ClassVar[str] = "Gu & Dao 2023 (Mamba), selective copying"

    def __init__(
        self,
        *,
        length: int = 24,
        num_tokens: int = 6,
        alphabet: int = 8,
        seed: int = 0,
        test_lengths: Sequence[int] | None = None,
        val_examples: int = 256,
        test_examples: int = 256,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__(
            seed=seed,
            test_lengths=test_lengths,
            val_examples=val_examples,
            test_examples=test_examples,
            cache_dir=cache_dir,
        )
        self.length, self.num_tokens, self.alphabet = int(length), int(num_tokens), int(alphabet)

    def sample(self, rng: np.random.Generator, length: int) -> Example:
        where = np.sort(rng.choice(length, size=self.num_tokens, replace=False))
        content = [symbol(i) for i in rng.integers(0, self.alphabet, size=self.num_tokens)]
        seq = [NOISE] * length
        for pos, c in zip(where, content):
            seq[pos] = c
        return Example("".join(seq) + SEP, "".join(content))

    def vocabulary(self) -> str:
        return SYMBOLS[: self.alphabet] + NOISE + SEP

    @classmethod
    def check_task(cls, args: Mapping[str, Any]) -> None:
        k = integer("num_tokens", args.get("num_tokens", 6), 1, why="content tokens per example")
        integer(
            "alphabet", args.get("alphabet", 8), 2, len(SYMBOLS), why="distinct content symbols"
        )
        length = args.get("length", 24)
        if isinstance(length, int) and not isinstance(length, bool) and length < k:
            raise fail(
                "length",
                length,
                f"at least data.num_tokens={k}: the content must fit in the sequence",
            )
        integer("length", length, 1, why="tokens of content and noise")
