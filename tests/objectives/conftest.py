"""The training tests' session fixtures (one torch thread, a temporary token cache) apply here too."""

from tests.training.conftest import one_thread, token_cache  # noqa: F401  (pytest fixtures, autouse)
