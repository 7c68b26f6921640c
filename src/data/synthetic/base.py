"""What a synthetic task is: a generator of (prompt, answer) examples, one character per token.

An example is a pure function of ``(data.seed, split, index)`` (and, for training, the run's seed):
``np.random.default_rng([data.seed, split code, stream, index])`` draws it, so every machine and
every job of a sweep sees the same validation and test examples, and nothing is downloaded or
stored.

Splits are disjoint by construction, whatever the size of the example space: the prompt's
blake2b hash puts every possible prompt in exactly one split (``HELD_OUT`` of the hash range for
test, as much for val, the rest for train), and a split's generator redraws until its prompt falls
in its own part. A short addition or sort, whose few prompts would otherwise recur, therefore never
trains on a test prompt. (The answer is a function of the prompt, so no answer leaks either.)

Symbols are characters (``symbol(i)``: ``0-9``, ``a-z``, ``A-Z``, then Latin-1 letters), so the
char tokenizer, fitted on ``vocabulary()``, gives each symbol one id, checkpoints carry it, and an
example prints as the tokens the model reads (``|`` separates prompt parts, ``.`` is noise).

A task declares ``length_key``: the key that sets its size and that ``data.test_lengths`` varies
(``length``, ``digits`` or ``num_pairs``). The values are checked once, when the run config is
validated (``check_run``); constructors trust them.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, ClassVar

import numpy as np

from src.data.sources.base import Source
from src.errors import DataError

SPLIT_CODES = {"train": 0, "val": 1, "test": 2}
HELD_OUT = 0.1  # share of the prompt-hash range reserved for test, and as much for val
MAX_DRAWS = 10_000  # redraws before a split is declared empty (an example space too small to split)
#: example lists drawn in this process (``SyntheticSource.examples``), by what determines them
_DRAWN: OrderedDict[tuple, tuple[Example, ...]] = OrderedDict()
DRAWN_LISTS = 16  # the most recent lists kept: a few tasks' validation, test and reference sets
_KEY_TYPES = (int, float, str, bool, type(None), PurePath)
SEP, NOISE = "|", "."
_ALNUM = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
#: content symbols: digits and ASCII letters, then the letters À … ÿ of Latin-1 (printable, one code
#: point each)
SYMBOLS = _ALNUM + "".join(chr(c) for c in range(0xC0, 0x100) if c not in (0xD7, 0xF7))


def symbol(i: int) -> str:
    """Content symbol ``i`` (0 -> '0', 10 -> 'a', 36 -> 'A', 62 -> 'À' …)."""
    return SYMBOLS[i]


def split_of(prompt: str) -> str:
    """The split a prompt belongs to, by a stable hash (the same on every machine and Python)."""
    u = (
        int.from_bytes(hashlib.blake2b(prompt.encode("utf-8"), digest_size=8).digest(), "big")
        / 2.0**64
    )
    return "test" if u < HELD_OUT else "val" if u < 2 * HELD_OUT else "train"


@dataclass(frozen=True)
class Example:
    """A prompt and its answer, one character per token; the model reads the prompt and is scored on
    the answer."""

    prompt: str
    answer: str


def fail(key: str, value: Any, fix: str) -> DataError:
    return DataError(f"data.{key}={value!r} is invalid: {fix}")


def integer(key: str, value: Any, low: int, high: int | None = None, why: str = "") -> int:
    """``value`` as an int in [low, high], else a DataError naming the key, the range and why."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        bound = (
            f"an integer from {low} to {high}"
            if high is not None
            else f"an integer, at least {low}"
        )
        raise fail(key, value, bound + (f" ({why})" if why else ""))
    return value


class SyntheticSource(Source):
    """Base of the synthetic tasks. Subclasses set ``length_key``, ``min_length`` and ``paper``, and
    implement ``sample``, ``vocabulary`` and ``check_task`` (their own keys' ranges)."""

    kind: ClassVar[str] = "synthetic"
    length_key: ClassVar[str] = "length"
    min_length: ClassVar[int] = 1
    paper: ClassVar[str] = ""

    def __init__(
        self,
        *,
        seed: int = 0,
        test_lengths: Sequence[int] | None = None,
        val_examples: int = 256,
        test_examples: int = 256,
        cache_dir: str | None = None,
    ) -> None:
        # examples are never stored; a study's n-gram references cache there
        super().__init__(cache_dir=cache_dir)
        self.seed = int(seed)
        self.val_examples, self.test_examples = int(val_examples), int(test_examples)
        self._test_lengths = None if test_lengths is None else [int(n) for n in test_lengths]

    # ------------------------------------------------------------ to implement
    def sample(self, rng: np.random.Generator, length: int) -> Example:
        """One example whose size key (``length_key``) is ``length``."""
        raise NotImplementedError

    def vocabulary(self) -> str:
        """Every character an example can hold."""
        raise NotImplementedError

    @classmethod
    def check_task(cls, args: Mapping[str, Any]) -> None:
        """The task's own keys (DataError naming the key and the allowed range)."""

    @classmethod
    def length_limit(cls, args: Mapping[str, Any]) -> tuple[int, str] | None:
        """The largest size an example can have with these keys, and why (None: no limit)."""
        return None

    # ------------------------------------------------------------ shared
    @property
    def train_length(self) -> int:
        return int(getattr(self, self.length_key))

    @property
    def test_lengths(self) -> list[int]:
        """The test lengths, the training length first: ``data.test_lengths`` or 1×, 2×, 4× the
        training length."""
        given = self._test_lengths or [self.train_length * f for f in (1, 2, 4)]
        return sorted(set([self.train_length, *given]))

    def sizes(self, length: int) -> tuple[int, int]:
        """(prompt tokens, answer tokens) of every example at ``length`` (they do not vary between
        examples)."""
        ex = self.sample(np.random.default_rng(0), length)
        return len(ex.prompt), len(ex.answer)

    def example(
        self, split: str, index: int, length: int | None = None, stream: int = 0
    ) -> Example:
        """Example ``index`` of ``split`` at ``length`` (default: the training length); ``stream``
        separates the training streams of different run seeds. Redraws until the prompt belongs to
        ``split``."""
        length = self.train_length if length is None else int(length)
        rng = np.random.default_rng(
            [self.seed, SPLIT_CODES[split], int(stream), int(index), length]
        )
        for _ in range(MAX_DRAWS):
            ex = self.sample(rng, length)
            if split_of(ex.prompt) == split:
                return ex
        raise DataError(
            f"data={self.name} with data.{self.length_key}={length} has too few distinct prompts "
            f"to give the {split} split any ({MAX_DRAWS} draws found none); raise "
            f"data.{self.length_key}"
        )

    def examples(
        self, split: str, count: int, length: int | None = None, stream: int = 0
    ) -> tuple[Example, ...]:
        """Examples ``0 … count-1`` of ``split`` at ``length`` in ``stream`` (``example``), drawn
        once per process: the jobs of one process (a multirun, a joblib worker taking job after
        job) that share a task and its keys read the list the first one drew, which is what they
        would have drawn (tests/training/test_shared_process.py: a job's results do not depend on
        it). Keyed by the task's class and every attribute; a task holding an attribute of another
        type than a number, string or path draws its own."""
        state = sorted(vars(self).items())
        if not all(isinstance(v, _KEY_TYPES) or k == "_test_lengths" for k, v in state):
            return tuple(self.example(split, k, length, stream) for k in range(count))
        key = (type(self), repr(state), split, int(count), length, int(stream))
        if key in _DRAWN:
            _DRAWN.move_to_end(key)
            return _DRAWN[key]
        drawn = tuple(self.example(split, k, length, stream) for k in range(count))
        _DRAWN[key] = drawn
        while len(_DRAWN) > DRAWN_LISTS:
            _DRAWN.popitem(last=False)
        return drawn

    def fingerprint(self) -> dict[str, Any]:
        """The task's name and keys (what determines every example)."""
        return {
            "name": self.name,
            **{
                k: v
                for k, v in vars(self).items()
                if not k.startswith("_") and isinstance(v, (int, float, str, bool))
            },
        }

    def check_train_min_length(self, value: int | None) -> None:
        """``data.train_min_length`` (the smallest size of a training batch,
        ``SyntheticDataModule``): null, or an integer from the task's smallest size to the training
        size, at which the task's keys hold and the training split has prompts. DataError naming the
        key otherwise."""
        if value is None:
            return
        name, key, train = self.registry_name, self.length_key, self.train_length  # type: ignore[attr-defined]
        integer(
            "train_min_length",
            value,
            self.min_length,
            train,
            why=f"the smallest data.{key} of a training batch: from data={name}'s smallest, {self.min_length}, to "
            f"the training data.{key}={train}; null trains every batch at {train}",
        )
        try:
            type(self).check_task({**self.fingerprint(), key: value})
            self.example("train", 0, length=value)
        except DataError as e:
            raise fail(
                "train_min_length",
                value,
                f"data={name} at data.{key}={value} is not a valid task ({e}); raise "
                "data.train_min_length",
            ) from e

    # ------------------------------------------------------------ validation (once, with the run
    # config)
    @classmethod
    def check_run(
        cls,
        args: Mapping[str, Any],
        *,
        block_size: int,
        tokenizer: str | None,
        objective: str | None = "synthetic",
        train_min_length: int | None = None,
        prompt_is_source: bool = False,
    ) -> None:
        """Every value of the data node, the tokenizer and objective it needs, and the training
        example against ``block_size``: a DataError naming the key, the value and the allowed range.
        Called by ``src.config.validate``; ``train_min_length`` is the datamodule's
        ``data.train_min_length``; ``prompt_is_source``: the model family reads the prompt through
        an encoder and the answer in its decoder (``TransformerModel.prompt_is_source``), not both
        as one sequence."""
        name = cls.registry_name  # type: ignore[attr-defined]
        if objective != "synthetic":
            raise DataError(
                f"data={name} is scored by objective=synthetic (answer-only loss, exact match, one test "
                f"set per length), not objective={objective}; conf/data/{name}.yaml selects it: remove "
                "the objective override"
            )
        if tokenizer != "char":
            raise DataError(
                f"data={name} writes one character per symbol and needs tokenizer=char, not "
                f"tokenizer={tokenizer} (conf/data/{name}.yaml selects char; remove the tokenizer "
                "override)"
            )
        integer("seed", args.get("seed", 0), 0, why="the seed of the validation and test examples")
        for key in ("val_examples", "test_examples"):
            integer(key, args.get(key, 256), 1, why="examples per evaluation set")
        cls.check_task(args)
        source = cls(**args)
        train = source.train_length
        if train < cls.min_length:
            raise fail(cls.length_key, train, f"data={name} needs at least {cls.min_length}")
        lengths = args.get("test_lengths")
        if lengths is not None:
            if (
                isinstance(lengths, (str, bytes))
                or not isinstance(lengths, Sequence)
                or not lengths
            ):
                raise fail(
                    "test_lengths",
                    lengths,
                    f"a list of {cls.length_key} values, e.g. [{train}, {2 * train}], "
                    "or null for 1x, 2x, 4x the training length",
                )
            for n in lengths:
                integer(
                    "test_lengths",
                    n,
                    train,
                    why=f"each test length at least the training data.{cls.length_key}="
                    f"{train}: shorter inputs are not a generalisation test",
                )
        limit = cls.length_limit(args)
        if limit is not None and max(source.test_lengths) > limit[0]:
            given = (
                "data.test_lengths"
                if lengths is not None
                else (f"data.test_lengths (null: 1x, 2x, 4x data.{cls.length_key}={train})")
            )
            raise DataError(
                f"{given}={source.test_lengths} goes beyond {limit[0]}: {limit[1]}; give "
                f"data.test_lengths at most {limit[0]}"
            )
        for split, n in [("val", train), *(("test", n) for n in source.test_lengths)]:
            # DataError: an example space too small to give every split a prompt
            source.example(split, 0, length=n)
        source.check_train_min_length(train_min_length)
        prompt, answer = source.sizes(train)
        if prompt_is_source:
            # the encoder reads the prompt; the decoder a start token and the answer but its last
            needed = max(prompt, answer)
            reads = f"which the encoder and the decoder read as {prompt} and {answer}"
        else:
            needed = prompt + answer - 1  # one sequence; the answer's last token is only predicted
            reads = f"which the model reads as {needed}"
        if needed > block_size:
            raise DataError(
                f"block_size={block_size} is too short for data={name} at "
                f"data.{cls.length_key}={train}: an example is {prompt} prompt + {answer} answer "
                f"tokens, {reads}; raise block_size (model.max_seq_len) to at least {needed} or "
                f"lower data.{cls.length_key}"
            )
