"""The synthetic tasks (src/data/sources/{strings,addition,induction,mqar,selective_copy}.py): every answer
recomputed here by independent means, deterministic generation across processes, disjoint splits,
and the bad-input checks of ``check_run`` (key, value and allowed range in each message)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from src.data.sources import SOURCES
from src.data.synthetic.base import NOISE, SEP, SYMBOLS, SyntheticSource, split_of
from src.errors import DataError

REPO = Path(__file__).resolve().parents[2]
N = 300  # examples checked per task and split

OBJECTIVES = ("copy", "reverse", "sort", "addition", "induction", "mqar", "selective_copy")


def make(name: str, **args: Any) -> SyntheticSource:
    """A source as a run makes it: its values checked once (``check_run``), then built."""
    cls = SOURCES.get(name)
    cls.check_run(args, block_size=1024, tokenizer="char")
    return cls(**args)


def examples(source: SyntheticSource, split: str = "train", length: int | None = None, n: int = N):
    return [source.example(split, i, length=length) for i in range(n)]


@pytest.mark.parametrize("name", ["copy", "reverse", "sort"])
def test_string_answers(name: str) -> None:
    src = make(name, length=12, alphabet=7)
    reference = {
        "copy": lambda s: s,
        "reverse": lambda s: "".join(reversed(s)),
        "sort": lambda s: "".join(sorted(s, key=lambda c: SYMBOLS.index(c))),
    }[name]
    for length in (12, 24):
        for ex in examples(src, length=length):
            assert ex.prompt.endswith(SEP) and len(ex.prompt) == length + 1
            s = ex.prompt[:-1]
            assert set(s) <= set(SYMBOLS[:7])
            assert ex.answer == reference(s)


@pytest.mark.parametrize("reverse_digits", [True, False])
def test_addition_answers(reverse_digits: bool) -> None:
    src = make("addition", digits=4, reverse_digits=reverse_digits)
    order = (lambda s: s[::-1]) if reverse_digits else (lambda s: s)
    for ex in examples(src, split="test"):
        a, b = ex.prompt.rstrip("=").split("+")
        assert len(a) == len(b) == 4 and len(ex.answer) == 5
        assert int(order(ex.answer)) == int(order(a)) + int(order(b))


def test_induction_answers() -> None:
    src = make("induction", length=20, segment=4, alphabet=10)
    firsts = set()
    for ex in examples(src, split="val"):
        seq = ex.prompt + ex.answer
        assert len(seq) == 20 and len(ex.answer) == 3
        cue = ex.prompt[-1]
        first = ex.prompt.index(cue)  # the cue occurs once before the second occurrence
        assert ex.prompt.count(cue) == 2 and first < len(ex.prompt) - 1
        # the tokens after the cue's first occurrence
        assert ex.answer == seq[first + 1 : first + 4]
        firsts.add(first)
    assert len(firsts) > 5  # drawn afresh: no fixed offset finds the first occurrence


def test_mqar_answers() -> None:
    src = make("mqar", num_pairs=6, num_queries=3, num_keys=24, num_values=8)
    for ex in examples(src):
        pairs, queries, rest = ex.prompt.split(SEP)
        assert rest == "" and len(pairs) == 12 and len(queries) == 3
        table = {pairs[i]: pairs[i + 1] for i in range(0, len(pairs), 2)}
        assert len(table) == 6  # distinct keys
        assert ex.answer == "".join(table[q] for q in queries)


def test_selective_copy_answers() -> None:
    src = make("selective_copy", length=16, num_tokens=5, alphabet=6)
    for ex in examples(src, length=32):
        assert ex.prompt.endswith(SEP) and len(ex.prompt) == 33
        assert ex.answer == "".join(c for c in ex.prompt[:-1] if c != NOISE)
        assert len(ex.answer) == 5


def _fingerprints() -> dict[str, str]:
    out = {}
    for name in OBJECTIVES:
        src = SOURCES.get(name)()
        out[name] = "".join(
            e.prompt + ">" + e.answer + ";"
            for split in ("train", "val", "test")
            for e in (src.example(split, i, stream=3) for i in range(20))
        )
    return out


def test_generation_is_deterministic_across_processes() -> None:
    code = (
        "import json; from tests.data.test_synthetic_tasks import _fingerprints; "
        "print(json.dumps(_fingerprints()))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONHASHSEED": "123", "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == _fingerprints()


@pytest.mark.parametrize(
    "name, args",
    [("addition", {"digits": 1}), ("sort", {"length": 4, "alphabet": 4}), ("copy", {"length": 8})],
)
def test_splits_are_disjoint(name: str, args: dict[str, Any]) -> None:
    """Even where the example space is tiny (100 one-digit sums, 256 strings of 4 of 4 symbols),
    no prompt of one split occurs in another: each prompt belongs to one split by its hash."""
    src = make(name, **args)
    prompts = {
        s: {e.prompt for e in examples(src, split=s, n=200)} for s in ("train", "val", "test")
    }
    assert not prompts["train"] & prompts["test"] and not prompts["train"] & prompts["val"]
    assert not prompts["val"] & prompts["test"]
    for split, ps in prompts.items():
        assert all(split_of(p) == split for p in ps)
    # another run seed's stream
    train_again = {src.example("train", i, stream=9).prompt for i in range(200)}
    assert not train_again & prompts["test"]


def test_streams_differ_and_repeat() -> None:
    src = make("copy")
    assert src.example("train", 5, stream=0) == src.example("train", 5, stream=0)
    assert [src.example("train", i, stream=0) for i in range(5)] != [
        src.example("train", i, stream=1) for i in range(5)
    ]


def test_default_test_lengths() -> None:
    assert make("copy", length=10).test_lengths == [10, 20, 40]
    assert make("addition", digits=3).test_lengths == [3, 6, 12]
    assert make("mqar", num_pairs=4).test_lengths == [4, 8, 16]
    assert make("copy", length=10, test_lengths=[30]).test_lengths == [
        10,
        30,
    ]  # the training length is always tested


@pytest.mark.parametrize(
    "name, args, key, fragment",
    [
        (
            "mqar",
            {"num_pairs": 40, "num_keys": 32},
            "data.num_pairs=40",
            "at most data.num_keys=32",
        ),
        (
            "mqar",
            {"num_pairs": 8, "num_keys": 16, "test_lengths": [8, 32]},
            "data.test_lengths=[8, 32]",
            "num_keys=16",
        ),
        (
            "mqar",
            {"num_pairs": 6, "num_keys": 12},
            "data.test_lengths (null: 1x, 2x, 4x data.num_pairs=6)=[6, 12, 24]",
            "at most 12",
        ),
        ("addition", {"digits": 5}, "[5, 10, 20]", "at most 18 digits"),
        (
            "mqar",
            {"num_queries": 9, "num_pairs": 8},
            "data.num_queries=9",
            "at most data.num_pairs=8",
        ),
        ("induction", {"length": 6, "segment": 4}, "data.length=6", "2 x data.segment = 8"),
        ("induction", {"segment": 4, "alphabet": 4}, "data.alphabet=4", "from 5 to"),
        ("selective_copy", {"length": 3, "num_tokens": 6}, "data.length=3", "num_tokens=6"),
        ("copy", {"length": 0}, "data.length=0", "at least 1"),
        ("copy", {"alphabet": 1}, "data.alphabet=1", "from 2 to"),
        ("sort", {"length": 8, "test_lengths": [4, 16]}, "data.test_lengths=4", "at least 8"),
        ("addition", {"digits": 0}, "data.digits=0", "from 1 to"),
        ("addition", {"digits": -2}, "data.digits=-2", "from 1 to"),
        ("addition", {"reverse_digits": "yes"}, "data.reverse_digits='yes'", "true"),
        (
            "sort",
            {"length": 3, "alphabet": 3, "test_lengths": [3]},
            "data.length=3",
            "too few distinct prompts",
        ),
        ("copy", {"val_examples": 0}, "data.val_examples=0", "at least 1"),
    ],
)
def test_bad_values_are_refused(name: str, args: dict[str, Any], key: str, fragment: str) -> None:
    with pytest.raises(DataError) as e:
        SOURCES.get(name).check_run(args, block_size=1024, tokenizer="char")
    assert key in str(e.value) and fragment in str(e.value)


def test_block_size_too_short_and_tokenizer() -> None:
    with pytest.raises(DataError) as e:
        SOURCES.get("copy").check_run({"length": 16}, block_size=20, tokenizer="char")
    msg = str(e.value)
    # 17 + 16 - 1
    assert "block_size=20" in msg and "data.length=16" in msg and "at least 32" in msg
    SOURCES.get("copy").check_run({"length": 16}, block_size=32, tokenizer="char")  # exactly fits
    with pytest.raises(DataError, match="needs tokenizer=char, not tokenizer=gpt2"):
        SOURCES.get("copy").check_run({}, block_size=64, tokenizer="gpt2")
    with pytest.raises(
        DataError, match="scored by objective=synthetic .*, not objective=decoder_translation"
    ):
        SOURCES.get("copy").check_run(
            {}, block_size=64, tokenizer="char", objective="decoder_translation"
        )


def test_vocabulary_covers_every_example() -> None:
    for name in OBJECTIVES:
        src = SOURCES.get(name)()
        vocab = set(src.vocabulary())
        for length in src.test_lengths:
            for ex in (src.example("test", i, length=length) for i in range(30)):
                assert set(ex.prompt + ex.answer) <= vocab, name


def test_mqar_interleaved_answers_each_query_then_its_value() -> None:
    """data.answer_format=interleaved: the same prompt as the default; the answer is q1 v1 q2 v2 ... (each value read
    from the pairs by its key), so the default's answer is every second symbol of it."""
    args = dict(num_pairs=6, num_queries=3, num_keys=24, num_values=8)
    plain, inter = make("mqar", **args), make("mqar", answer_format="interleaved", **args)
    for a, b in zip(examples(plain), examples(inter)):
        assert a.prompt == b.prompt
        pairs, queries, _ = b.prompt.split(SEP)
        table = {pairs[i]: pairs[i + 1] for i in range(0, len(pairs), 2)}
        assert b.answer == "".join(q + table[q] for q in queries) and b.answer[1::2] == a.answer
    with pytest.raises(
        DataError, match=r"data.answer_format='inline' is invalid: one of values, interleaved"
    ):
        make("mqar", answer_format="inline", **args)


def test_example_lists_drawn_once_per_process_are_the_examples() -> None:
    """``SyntheticSource.examples``: a second source with the same task and keys gets the list the
    first drew (the same object); any other key, split, length, count or stream draws its own,
    example for example what ``example`` gives; only the most recent lists are kept."""
    from src.data.synthetic import base

    a, b = make("copy", length=6, alphabet=5), make("copy", length=6, alphabet=5)
    first = a.examples("test", 8, length=12)
    assert b.examples("test", 8, length=12) is first
    assert list(first) == [b.example("test", k, length=12) for k in range(8)]
    for other, args in (
        (make("copy", length=6, alphabet=6), ("test", 8, 12, 0)),
        (make("copy", length=6, alphabet=5, seed=1), ("test", 8, 12, 0)),
        (make("reverse", length=6, alphabet=5), ("test", 8, 12, 0)),
        (a, ("val", 8, 12, 0)),
        (a, ("test", 8, 6, 0)),
        (a, ("test", 5, 12, 0)),
        (a, ("train", 8, 12, 3)),
    ):
        drawn = other.examples(*args)
        assert drawn is not first
        split, count, length, stream = args
        assert list(drawn) == [other.example(split, k, length, stream) for k in range(count)]
    for n in range(base.DRAWN_LISTS):
        a.examples("train", 2, stream=100 + n)
    assert len(base._DRAWN) == base.DRAWN_LISTS
    assert b.examples("test", 8, length=12) is not first  # pushed out, drawn again
