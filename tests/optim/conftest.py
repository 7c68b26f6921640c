"""Fixtures of the optimiser tests (tests/run_fixtures.py: Hydra composition, a tiny CPU run)."""

from tests.run_fixtures import _one_thread, compose, tiny, token_cache  # noqa: F401  (pytest fixtures)
