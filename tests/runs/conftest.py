"""Fixtures of the per-run infrastructure tests (tests/run_fixtures.py: Hydra composition, a tiny CPU run, subprocess helpers)."""

from tests.run_fixtures import _one_thread, compose, procs, tiny, token_cache  # noqa: F401  (pytest fixtures)
