"""The model package's error type (a ``ValueError``), importable by every component."""
from __future__ import annotations


class ConfigError(ValueError):
    """A model config that cannot be built; the message names the key, the value and the fix."""
