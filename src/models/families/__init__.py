"""Architecture families, registered by name (``model.family``)."""

from src.models.families.base import FAMILIES, TransformerModel

__all__ = ["FAMILIES", "TransformerModel"]
