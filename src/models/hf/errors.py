"""The one error Hugging Face conversion raises."""
from __future__ import annotations


class HFConversionError(ValueError):
    """A checkpoint or config we cannot convert exactly; the message names the key and the fix."""
