"""Whether a failed run diverged: its stored error names a non-finite loss."""

from __future__ import annotations

NONFINITE_WORDS = ("nonfinite", "non-finite", "nan loss", "inf loss", "nan/inf")


def is_divergence(error: object) -> bool:
    """Whether a failed run's stored error (``metrics.json``'s ``error``) is a non-finite loss."""
    text = str(error or "").lower()
    return any(w in text for w in NONFINITE_WORDS)
