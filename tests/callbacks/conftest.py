"""The training tests' session fixtures (one torch thread, a temporary token cache) apply here too, and the
run fixtures of the guard, preemption and fault tests (tests/run_fixtures.py: a tiny CPU run, subprocess helpers)."""

from tests.run_fixtures import _one_thread, compose, procs, tiny  # noqa: F401  (pytest fixtures)
from tests.training.conftest import one_thread, token_cache  # noqa: F401  (pytest fixtures, autouse)
