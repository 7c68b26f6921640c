"""The interpolated Kneser-Ney reference against a direct, dictionary-based implementation of the
same formula, plus normalisation over the vocabulary for every context."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np
import pytest

from src.evaluation.ngram import KneserNey


def brute_force_kn(train: list[list[int]], V: int, order: int, start: bool):
    """p(w | history, K) written from the formula in src/evaluation/ngram.py, with dicts."""
    S = V  # start symbol
    seqs = [([S] + s if start else list(s)) for s in train]
    first = 1 if start else 0
    count: list[Counter] = [Counter() for _ in range(order + 1)]  # count[k][gram tuple]
    for s in seqs:
        for i in range(first, len(s)):
            for k in range(1, min(order, i + 1) + 1):
                count[k][tuple(s[i - k + 1 : i + 1])] += 1
    # distinct left extensions with count > 0
    cont: list[Counter] = [Counter() for _ in range(order + 1)]
    for k in range(2, order + 1):
        for g in count[k]:
            cont[k - 1][g[1:]] += 1

    def disc(c: Counter) -> float:
        n1, n2 = sum(v == 1 for v in c.values()), sum(v == 2 for v in c.values())
        return n1 / (n1 + 2 * n2) if n1 + n2 else 0.5

    d_count = [0.0] + [disc(count[k]) for k in range(1, order + 1)]
    d_cont = [0.0] + [disc(cont[k]) for k in range(1, order + 1)]
    by_ctx: list[dict] = [dict() for _ in range(order + 1)]
    for k in range(1, order + 1):
        for kind, table in (("count", count[k]), ("cont", cont[k])):
            agg: dict = defaultdict(lambda: [0, 0])
            for g, c in table.items():
                if c > 0:
                    agg[g[:-1]][0] += c
                    agg[g[:-1]][1] += 1
            by_ctx[k][kind] = agg

    def p(history: list[int], w: int, K: int) -> float:
        prob = 1.0 / V
        for k in range(1, K + 1):
            h = tuple(history[len(history) - (k - 1) :]) if k > 1 else ()
            kind = "count" if k == K else "cont"
            table, d = (count[k], d_count[k]) if k == K else (cont[k], d_cont[k])
            denom, types = by_ctx[k][kind].get(h, (0, 0))
            if denom > 0:
                prob = (max(table.get(h + (w,), 0) - d, 0) + d * types * prob) / denom
        return prob

    return p


@pytest.mark.parametrize("start", [False, True])
def test_matches_the_formula_written_with_dicts(start: bool) -> None:
    rng = np.random.default_rng(3)
    V = 6
    train = [list(rng.integers(0, V, rng.integers(3, 40))) for _ in range(30)]
    for s in train:  # some structure, so higher orders matter
        s[::3] = [2] * len(s[::3])
    model = KneserNey(4, V).fit([np.array(s) for s in train], start=start)
    # 5 never follows in a fixed context
    evals = [list(rng.integers(0, V, 9)) + [5] for _ in range(5)]
    ref = brute_force_kn(train, V, 4, start)
    for order in (1, 2, 3, 4):
        got = model.probabilities([np.array(e) for e in evals], order, n_context=1, start=start)
        want = []
        for e in evals:
            seq = ([V] if start else []) + e
            for i in range(1, len(seq)):
                want.append(ref(seq[:i], seq[i], min(order, i + 1)))
        assert got == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("start", [False, True])
def test_probabilities_sum_to_one_over_the_vocabulary(start: bool) -> None:
    rng = np.random.default_rng(0)
    V = 7
    model = KneserNey(4, V).fit(
        [rng.integers(0, V, 400)]
        if not start
        else [rng.integers(0, V, rng.integers(1, 8)) for _ in range(80)],
        start=start,
    )
    for order in (1, 2, 3, 4):
        for ctx in ([], [1], [3, 3], [0, 6, 2], [6, 6, 6, 6]):  # seen and unseen contexts
            seqs = [np.array([*ctx, w] if ctx or start else [0, w]) for w in range(V)]
            p = model.probabilities(seqs, order, n_context=max(len(ctx), 1), start=start)
            last = p.reshape(V, -1)[:, -1]
            assert last.sum() == pytest.approx(1.0, abs=1e-12) and (last > 0).all()


def test_higher_orders_fit_structure_and_the_window_limits_context() -> None:
    pattern = np.tile(np.arange(5), 200)  # 0 1 2 3 4 0 1 ...: a bigram already knows the next token
    model = KneserNey(3, 5).fit([pattern])
    windows = [pattern[i : i + 9] for i in range(0, 90, 8)]
    uni, n = model.nll(windows, 1)
    bi, _ = model.nll(windows, 2)
    assert n == 8 * len(windows) and uni == pytest.approx(math.log(5), abs=0.01) and bi < 0.05
    # a window's first target sees one token of context: the trigram model scores it as the bigram does
    assert model.probabilities([np.array([0, 1])], 3) == pytest.approx(
        model.probabilities([np.array([0, 1])], 2)
    )
    assert model.nll([np.array([4, 0, 1, 2])], 3)[1] == 3


def test_orders_longer_than_every_training_sequence_back_off() -> None:
    """One-token answers (data=mqar data.num_queries=1): with the start symbol the longest n-gram is a bigram,
    so the 3- and 4-gram tables are empty; the higher orders must score as the bigram does, even on longer
    test sequences, and still sum to one."""
    rng = np.random.default_rng(0)
    V = 5
    model = KneserNey(4, V).fit([rng.integers(0, V, 1) for _ in range(200)], start=True)
    seqs = [rng.integers(0, V, n) for n in (1, 1, 3)]
    bigram = model.probabilities(seqs, 2, start=True)
    for order in (3, 4):
        assert np.array_equal(model.probabilities(seqs, order, start=True), bigram)
    p = model.probabilities([np.array([2, w]) for w in range(V)], 4, start=True).reshape(V, -1)[
        :, -1
    ]
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
