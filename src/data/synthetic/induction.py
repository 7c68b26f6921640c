"""``data=induction``: random tokens in which one random segment occurs twice; the tokens of the
second occurrence after its first are the answer.

::

    sequence  5 1 [c 9 e 4] 7 1 2 5 … 0 [c 9 e 4]        (length L, segment k = 4)
    prompt    everything up to the first token of the second occurrence (… 0 c)
    answer    9 e 4                                    (its k - 1 remaining tokens)

The first occurrence starts at a position drawn afresh for every example, so no fixed offset
finds it: each answer token is predicted by finding the earlier occurrence of the current token
and copying the token after it. That needs a previous-token head feeding an induction head in a
later layer (Olsson et al. 2022, "In-context Learning and Induction Heads",
arXiv:2209.11895), which a one-layer attention-only model cannot form. The segment's symbols are
distinct and never occur in the filler, so the earlier occurrence is unambiguous. The
extrapolation version is Gu & Dao 2023 (Mamba, arXiv:2312.00752) Table 2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from src.data.sources import SOURCES
from src.data.synthetic.base import SYMBOLS, Example, SyntheticSource, fail, integer, symbol


@SOURCES.register("induction")
class Induction(SyntheticSource):
    length_key: ClassVar[str] = "length"
    min_length: ClassVar[int] = 4
    paper: ClassVar[str] = "Olsson et al. 2022 (induction heads); Gu & Dao 2023 (extrapolation)"

    def __init__(
        self,
        *,
        length: int = 32,
        segment: int = 8,
        alphabet: int = 16,
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
        self.length, self.segment, self.alphabet = int(length), int(segment), int(alphabet)

    def sample(self, rng: np.random.Generator, length: int) -> Example:
        k = self.segment
        perm = rng.permutation(self.alphabet)
        seg, filler = perm[:k], perm[k:]  # distinct segment symbols; the filler never holds one
        seq = filler[rng.integers(0, len(filler), size=length)]
        # the first occurrence, anywhere before the second
        first = int(rng.integers(0, length - 2 * k + 1))
        seq[first : first + k] = seg
        seq[length - k :] = seg  # the second occurrence ends the sequence
        text = "".join(symbol(int(i)) for i in seq)
        return Example(text[: length - k + 1], text[length - k + 1 :])

    def vocabulary(self) -> str:
        return SYMBOLS[: self.alphabet]

    @classmethod
    def check_task(cls, args: Mapping[str, Any]) -> None:
        k = integer(
            "segment",
            args.get("segment", 8),
            2,
            why="tokens of the repeated segment: its first is the cue, the rest the answer",
        )
        integer(
            "alphabet",
            args.get("alphabet", 16),
            k + 1,
            len(SYMBOLS),
            why=f"distinct symbols: the segment's {k} plus at least one filler symbol",
        )
        length = args.get("length", 32)
        if isinstance(length, int) and not isinstance(length, bool) and length < 2 * k:
            raise fail(
                "length", length, f"at least 2 x data.segment = {2 * k}: the segment occurs twice"
            )
        integer("length", length, cls.min_length, why="tokens per sequence")
