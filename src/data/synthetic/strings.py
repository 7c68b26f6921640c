"""String transductions: ``copy``, ``reverse``, ``sort`` (``data=copy`` …).

A random string of ``data.length`` symbols drawn uniformly from ``data.alphabet`` symbols, the
separator, then the answer: the string itself, reversed, or sorted (by symbol order)::

    prompt  3 a 0 7 3 |        answer (copy) 3 a 0 7 3   (reverse) 3 7 0 a 3   (sort) 0 3 3 7 a

Kazemnejad et al. 2023, "The Impact of Positional Encoding on Length Generalization in
Transformers" (arXiv:2305.19466), copy / reverse / sort among its tasks; Delétang et al. 2023,
"Neural Networks and the Chomsky Hierarchy" (arXiv:2207.02098), duplicate / reverse string.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from src.data.sources import SOURCES
from src.data.synthetic.base import SEP, SYMBOLS, Example, SyntheticSource, integer, symbol


class StringTask(SyntheticSource):
    """A random string and a separator; the answer is ``transform`` of the string."""

    length_key: ClassVar[str] = "length"
    min_length: ClassVar[int] = 1

    def __init__(
        self,
        *,
        length: int = 16,
        alphabet: int = 10,
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
        self.length, self.alphabet = int(length), int(alphabet)

    def transform(self, s: str) -> str:
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, length: int) -> Example:
        s = "".join(symbol(i) for i in rng.integers(0, self.alphabet, size=length))
        return Example(s + SEP, self.transform(s))

    def vocabulary(self) -> str:
        return SYMBOLS[: self.alphabet] + SEP

    @classmethod
    def check_task(cls, args: Mapping[str, Any]) -> None:
        integer("length", args.get("length", 16), cls.min_length, why="symbols per string")
        integer(
            "alphabet",
            args.get("alphabet", 10),
            2,
            len(SYMBOLS),
            why="distinct symbols: one symbol makes every answer the same",
        )


@SOURCES.register("copy")
class Copy(StringTask):
    paper: ClassVar[str] = "Kazemnejad et al. 2023; Delétang et al. 2023 (duplicate string)"

    def transform(self, s: str) -> str:
        return s


@SOURCES.register("reverse")
class Reverse(StringTask):
    paper: ClassVar[str] = "Kazemnejad et al. 2023; Delétang et al. 2023 (reverse string)"

    def transform(self, s: str) -> str:
        return s[::-1]


@SOURCES.register("sort")
class Sort(StringTask):
    paper: ClassVar[str] = "Kazemnejad et al. 2023 (sorting)"

    def transform(self, s: str) -> str:
        return "".join(sorted(s, key=SYMBOLS.index))
