"""``data=mqar``: multi-query associative recall. ``data.num_pairs`` key-value pairs, then queries
of ``data.num_queries`` of the keys; the answer is each queried key's value, in query order.

::

    prompt  a 3 d 7 b 3 f 1 | d a |        answer 7 3        (num_pairs 4, num_queries 2)
    prompt  a 3 d 7 b 3 f 1 | d a |        answer d 7 a 3    (data.answer_format=interleaved)

``data.answer_format``: ``values`` (the default) answers with the values alone, so the answer token
for query ``i`` has to fetch query ``i`` from a fixed offset back, find that key among the pairs and
read the value after it. ``interleaved`` answers each query key and then its value, as Zoology's
sequences place each value right after its query: the key is a copy of the prompt's query list (a
fixed offset back), and its value is read where that key occurs among the pairs, with the key as the
current token (the induction-head lookup). Exact match needs every key and every value right.

Arora et al. 2023, "Zoology: Measuring and Improving Recall in Efficient Language Models"
(arXiv:2312.04927), §3: the keys of an example are distinct, drawn from ``data.num_keys`` key
symbols, and the values from ``data.num_values`` other symbols (with repeats), so recall must go
through the key. Zoology places each query's value right after it; here the queries come together
and the values form the answer, so the prompt holds no answer token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from src.data.sources import SOURCES
from src.data.synthetic.base import SEP, SYMBOLS, Example, SyntheticSource, fail, integer, symbol

ANSWER_FORMATS = ("values", "interleaved")


@SOURCES.register("mqar")
class MQAR(SyntheticSource):
    length_key: ClassVar[str] = "num_pairs"
    min_length: ClassVar[int] = 1
    paper: ClassVar[str] = "Arora et al. 2023 (Zoology, MQAR)"

    def __init__(
        self,
        *,
        num_pairs: int = 8,
        num_queries: int = 4,
        num_keys: int = 32,
        num_values: int = 16,
        answer_format: str = "values",
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
        self.num_pairs, self.num_queries = int(num_pairs), int(num_queries)
        self.num_keys, self.num_values = int(num_keys), int(num_values)
        self.answer_format = str(answer_format)

    def sample(self, rng: np.random.Generator, length: int) -> Example:
        keys = rng.choice(self.num_keys, size=length, replace=False)  # distinct keys
        values = rng.integers(0, self.num_values, size=length)
        # which pairs are queried, in query order
        asked = rng.choice(length, size=self.num_queries, replace=False)
        pairs = "".join(
            symbol(int(k)) + symbol(self.num_keys + int(v)) for k, v in zip(keys, values)
        )
        queries = "".join(symbol(int(keys[i])) for i in asked)
        answers = [symbol(self.num_keys + int(values[i])) for i in asked]
        if self.answer_format == "interleaved":  # q1 v1 q2 v2 ...
            answers = [q + v for q, v in zip(queries, answers)]
        return Example(pairs + SEP + queries + SEP, "".join(answers))

    def vocabulary(self) -> str:
        return SYMBOLS[: self.num_keys + self.num_values] + SEP

    @classmethod
    def check_task(cls, args: Mapping[str, Any]) -> None:
        keys = integer("num_keys", args.get("num_keys", 32), 1, len(SYMBOLS) - 2, why="key symbols")
        integer(
            "num_values",
            args.get("num_values", 16),
            2,
            len(SYMBOLS) - keys,
            why=f"value symbols, besides the {keys} key symbols ({len(SYMBOLS)} symbols in all)",
        )
        pairs = integer(
            "num_pairs",
            args.get("num_pairs", 8),
            1,
            keys,
            why=f"the keys of an example are distinct, so at most data.num_keys={keys} pairs",
        )
        integer(
            "num_queries",
            args.get("num_queries", 4),
            1,
            pairs,
            why=f"queried keys, at most data.num_pairs={pairs}",
        )
        fmt = args.get("answer_format", "values")
        if fmt not in ANSWER_FORMATS:
            raise fail(
                "answer_format",
                fmt,
                f"one of {', '.join(ANSWER_FORMATS)} (values: the values alone; "
                "interleaved: each query key, then its value)",
            )

    @classmethod
    def length_limit(cls, args: Mapping[str, Any]) -> tuple[int, str] | None:
        keys = args.get("num_keys", 32)
        return (
            keys,
            f"the keys of an example are distinct, so at most data.num_keys={keys} pairs (or raise "
            "num_keys)",
        )
