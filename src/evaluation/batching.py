"""Length-bucketed batching for evaluation, and a progress bar.

Sorting requests by length (longest first, as lm-evaluation-harness does) puts examples
of similar length together, so a batch wastes little compute on padding and an
out-of-memory error, if any, happens on the first batch rather than the last. Results
are returned in the caller's order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor


def length_batches(
    lengths: Sequence[int], max_batch_size: int, max_batch_tokens: int
) -> list[list[int]]:
    """Indices grouped into batches of similar length, longest first.

    A batch holds at most ``max_batch_size`` items and at most ``max_batch_tokens`` padded
    tokens (items × its longest length); a single item longer than the token budget gets a
    batch of its own.
    """
    if max_batch_size < 1 or max_batch_tokens < 1:
        raise ValueError(
            f"batch_size={max_batch_size} and max_batch_tokens={max_batch_tokens} must both be >= 1"
        )
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        longest = lengths[current[0]] if current else lengths[i]  # sorted: the first is the longest
        if current and (
            len(current) + 1 > max_batch_size or (len(current) + 1) * longest > max_batch_tokens
        ):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def pad_right(
    seqs: Sequence[Sequence[int]], pad_id: int, length: int | None = None
) -> tuple[Tensor, Tensor]:
    """Lists of ids -> (ids [B, T], mask [B, T]) right-padded with ``pad_id`` (mask 1 = token)."""
    T = length if length is not None else max((len(s) for s in seqs), default=0)
    ids = torch.full((len(seqs), T), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), T), dtype=torch.long)
    for b, s in enumerate(seqs):
        ids[b, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
        mask[b, : len(s)] = 1
    return ids, mask


@contextmanager
def progress_bar(
    total: int, description: str, enabled: bool = True
) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr; yields ``advance(n)``. A no-op when not ``enabled``."""
    if not enabled:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)
