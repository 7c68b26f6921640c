"""``data=addition``: two ``data.digits``-digit numbers, then the digits of their sum.

::

    prompt  0 4 7 + 3 9 5 =      answer 0 4 4 2          (digits 3: 047 + 395 = 0442)
    reverse_digits: true         prompt 7 4 0 + 5 9 3 =  answer 2 4 4 0   (least significant first)

Operands are zero-padded to ``digits`` and the sum to ``digits + 1``, so every example at one
length has the same shape. Writing the digits least significant first lets a left-to-right model
produce each digit after the ones it depends on; Lee et al. 2023 ("Teaching Arithmetic to Small
Transformers", arXiv:2307.03381) find that reversed output is learned far faster. Addition is one
of the length-generalization tasks of Kazemnejad et al. 2023 (arXiv:2305.19466).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from src.data.sources import SOURCES
from src.data.synthetic.base import Example, SyntheticSource, fail, integer

MAX_DIGITS = 18  # operands stay below 2**63 (numpy's integers)


@SOURCES.register("addition")
class Addition(SyntheticSource):
    length_key: ClassVar[str] = "digits"
    min_length: ClassVar[int] = 1
    paper: ClassVar[str] = "Kazemnejad et al. 2023; Lee et al. 2023 (reversed digits)"

    def __init__(
        self,
        *,
        digits: int = 3,
        reverse_digits: bool = True,
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
        self.digits, self.reverse_digits = int(digits), bool(reverse_digits)

    def sample(self, rng: np.random.Generator, length: int) -> Example:
        a, b = (int(x) for x in rng.integers(0, 10**length, size=2))
        order = (lambda s: s[::-1]) if self.reverse_digits else (lambda s: s)
        return Example(
            f"{order(str(a).zfill(length))}+{order(str(b).zfill(length))}=",
            order(str(a + b).zfill(length + 1)),
        )

    def vocabulary(self) -> str:
        return "0123456789+="

    @classmethod
    def check_task(cls, args: Mapping[str, Any]) -> None:
        integer("digits", args.get("digits", 3), 1, MAX_DIGITS, why="digits per operand")
        if not isinstance(args.get("reverse_digits", True), bool):
            raise fail(
                "reverse_digits",
                args["reverse_digits"],
                "true (least significant digit first) or false",
            )

    @classmethod
    def length_limit(cls, args: Mapping[str, Any]) -> tuple[int, str] | None:
        return MAX_DIGITS, f"operands have at most {MAX_DIGITS} digits (numpy's 64-bit integers)"
