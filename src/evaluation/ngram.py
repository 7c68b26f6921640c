"""Smoothed n-gram language models: the reference a trained model must beat.

``KneserNey(order, vocab_size).fit(sequences)`` counts every k-gram (k = 1 … order) of the
training token sequences; ``nll(sequences, k)`` scores other sequences with the order-``k``
model. Interpolated Kneser-Ney (Kneser & Ney 1995; Chen & Goodman 1999, eq. 17 with one
discount per order)::

    p_k(w | h) = max(c_k(h w) - D_k, 0) / c_k(h·)  +  D_k · N1+(h ·) / c_k(h·) · p_{k-1}(w | h')
    p_0(w)     = 1 / V                                         (h' = h without its first token)

where, for the model's highest order, ``c_k`` is the count of the k-gram and, for the lower
orders, its *continuation count* ``N1+(· h w)`` (how many distinct tokens precede it);
``c_k(h·) = Σ_w c_k(h w)``, ``N1+(h ·)`` the number of distinct ``w`` with ``c_k(h w) > 0``, and a
context never seen falls through to ``p_{k-1}``. The discounts come from the training counts
alone, ``D_k = n1 / (n1 + 2 n2)`` (n1, n2: k-grams seen once, twice), so nothing is tuned on
the split being scored. Probabilities sum to one over the vocabulary for every context.

A sequence's first ``n_context`` tokens are context only (an evaluation window's first token; a
sentence's start symbol, id ``vocab_size``, when ``start=True``); every later token is scored
with the context that precedes it inside the sequence, as a model scoring the same window
sees it. Counting is vectorised with numpy: the k-gram ending at position i gets the id of the
pair (id of the (k-1)-gram ending at i-1, token i), found with ``np.unique``/``np.searchsorted``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class _Order:
    keys: np.ndarray  # sorted unique keys (prefix id · (V+1) + token) of the k-grams
    prefix: np.ndarray  # [n_k] id of each k-gram's (k-1)-gram prefix (its context); 0 for k = 1
    count: np.ndarray  # [n_k] occurrences as a scored token
    cont: np.ndarray  # [n_k] continuation count: distinct (k+1)-grams ending in this k-gram
    ctx_count: np.ndarray  # [n_{k-1}] Σ count over the k-grams of each context
    ctx_types: np.ndarray  # [n_{k-1}] distinct k-grams with count > 0 per context
    ctx_cont: np.ndarray  # [n_{k-1}] Σ cont over the k-grams of each context
    ctx_cont_types: np.ndarray  # [n_{k-1}] distinct k-grams with cont > 0 per context
    d_count: float  # discount with counts (the highest order)
    d_cont: float  # discount with continuation counts (lower orders)


def _discount(counts: np.ndarray) -> float:
    n1, n2 = int(np.sum(counts == 1)), int(np.sum(counts == 2))
    return n1 / (n1 + 2 * n2) if n1 + n2 > 0 else 0.5


def _flatten(
    sequences: Sequence[np.ndarray], start_id: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, position inside its sequence) of all sequences, with the start symbol prepended."""
    parts, pos = [], []
    for s in sequences:
        s = np.asarray(s, dtype=np.int64)
        if start_id is not None:
            s = np.concatenate([[start_id], s])
        parts.append(s)
        pos.append(np.arange(len(s)))
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(parts), np.concatenate(pos)


class KneserNey:
    """Interpolated Kneser-Ney n-gram models of orders 1 … ``order`` (module docstring)."""

    def __init__(self, order: int, vocab_size: int) -> None:
        if order < 1 or vocab_size < 1:
            raise ValueError(f"order ({order}) and vocab_size ({vocab_size}) must be positive")
        self.order, self.V = int(order), int(vocab_size)
        self.base = self.V + 1  # ids 0..V-1 and the start symbol V
        self.orders: list[_Order] = []
        self.train_tokens = 0

    def _ids(
        self, tok: np.ndarray, pos: np.ndarray, k: int, prev: np.ndarray, table: _Order | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(id of the k-gram ending at each position or -1, its key) from the (k-1)-gram ids
        ``prev``."""
        ids = np.full(len(tok), -1, dtype=np.int64)
        keys = np.full(len(tok), -1, dtype=np.int64)
        ok = pos >= k - 1
        if k > 1:
            ok[1:] &= prev[:-1] >= 0
            ok[0] = ok[0] and k == 1
            keys[1:][ok[1:]] = prev[:-1][ok[1:]] * self.base + tok[1:][ok[1:]]
        else:
            keys[ok] = tok[ok]
        if table is not None and len(table.keys):  # look up in the training table
            at = np.searchsorted(table.keys, keys[ok])
            at = np.minimum(at, len(table.keys) - 1)
            found = table.keys[at] == keys[ok]
            ids[np.flatnonzero(ok)[found]] = at[found]
        return ids, keys

    def fit(
        self,
        sequences: Sequence[np.ndarray],
        start: bool = False,
        stop: Callable[[], None] | None = None,
    ) -> KneserNey:
        """Count the k-grams of ``sequences`` (with a start symbol before each when ``start``).
        ``stop`` is called before each order's counting and smoothing (a long fit's cancellation
        point: it raises to end the fit, e.g. on a preemption signal)."""
        stop = stop or (lambda: None)
        stop()
        tok, pos = _flatten(sequences, self.V if start else None)
        scored = pos >= (1 if start else 0)  # the start symbol is context, never a scored token
        self.train_tokens = int(scored.sum())
        prev = np.zeros(len(tok), dtype=np.int64)
        raw: list[
            tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
        ] = []  # (keys, prefix, count, inverse ids)
        for k in range(1, self.order + 1):
            stop()
            _, keys = self._ids(tok, pos, k, prev, None)
            valid = keys >= 0
            uniq, inverse = np.unique(keys[valid], return_inverse=True)
            ids = np.full(len(tok), -1, dtype=np.int64)
            ids[valid] = inverse
            count = np.bincount(inverse[scored[valid]], minlength=len(uniq)).astype(np.int64)
            prefix = uniq // self.base if k > 1 else np.zeros(len(uniq), dtype=np.int64)
            raw.append((uniq, prefix, count, ids))
            prev = ids
        for k in range(1, self.order + 1):
            stop()
            uniq, prefix, count, ids = raw[k - 1]
            n_ctx = len(raw[k - 2][0]) if k > 1 else 1
            # continuation: distinct (k+1)-grams (seen as scored) whose suffix is this k-gram
            if k < self.order:
                up_ids, up_count = raw[k][3], raw[k][2]
                ends = np.flatnonzero(up_ids >= 0)
                first = np.unique(up_ids[ends], return_index=True)[1]
                occ = ends[first]  # one position per distinct (k+1)-gram
                keep = up_count[up_ids[occ]] > 0
                cont = np.bincount(ids[occ[keep]], minlength=len(uniq)).astype(np.int64)
            else:
                cont = np.zeros(len(uniq), dtype=np.int64)
            self.orders.append(
                _Order(
                    keys=uniq,
                    prefix=prefix,
                    count=count,
                    cont=cont,
                    ctx_count=np.bincount(prefix, weights=count, minlength=n_ctx),
                    ctx_types=np.bincount(prefix, weights=count > 0, minlength=n_ctx),
                    ctx_cont=np.bincount(prefix, weights=cont, minlength=n_ctx),
                    ctx_cont_types=np.bincount(prefix, weights=cont > 0, minlength=n_ctx),
                    d_count=_discount(count[count > 0]),
                    d_cont=_discount(cont[cont > 0]),
                )
            )
        return self

    def probabilities(
        self, sequences: Sequence[np.ndarray], order: int, n_context: int = 1, start: bool = False
    ) -> np.ndarray:
        """p(token | its context) of every scored token, in sequence order."""
        if not 1 <= order <= self.order:
            raise ValueError(f"order {order} outside 1..{self.order}")
        tok, pos = _flatten(sequences, self.V if start else None)
        first = 1 if start else n_context
        ids: list[np.ndarray] = []
        prev = np.zeros(len(tok), dtype=np.int64)
        for k in range(1, order + 1):
            prev, _ = self._ids(tok, pos, k, prev, self.orders[k - 1])
            ids.append(prev)
        targets = np.flatnonzero(pos >= first)
        # the context inside the sequence limits the order
        eff = np.minimum(order, pos[targets] + 1)
        p = np.full(len(targets), 1.0 / self.V)
        for k in range(1, order + 1):
            table = self.orders[k - 1]
            # no k-gram in training (every sequence shorter than k): order k adds nothing
            if table.count.size == 0:
                continue
            if k == 1:
                ctx = np.zeros(len(targets), dtype=np.int64)
            else:
                ctx = ids[k - 2][targets - 1]
            own = ids[k - 1][targets]
            active = (eff >= k) & (ctx >= 0)
            top = eff == k
            c = np.where(
                own >= 0,
                np.where(top, table.count[np.maximum(own, 0)], table.cont[np.maximum(own, 0)]),
                0,
            )
            cc = np.maximum(ctx, 0)
            denom = np.where(top, table.ctx_count[cc], table.ctx_cont[cc])
            types = np.where(top, table.ctx_types[cc], table.ctx_cont_types[cc])
            d = np.where(top, table.d_count, table.d_cont)
            use = active & (denom > 0)
            p = np.where(use, (np.maximum(c - d, 0) + d * types * p) / np.where(use, denom, 1.0), p)
        return p

    def nll(
        self, sequences: Sequence[np.ndarray], order: int, n_context: int = 1, start: bool = False
    ) -> tuple[float, int]:
        """(mean negative log-likelihood in nats per scored token, number of scored tokens)."""
        p = self.probabilities(sequences, order, n_context, start)
        if p.size == 0:
            return math.nan, 0
        return float(-np.mean(np.log(p))), int(p.size)
