"""Model tests build hundreds of tiny models: one intra-op thread each is fastest (two OpenMP threads on
the shared 2-core machine spin against each other)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
