"""Architecture families, registered by name (``model.family``)."""
from src.models.families import decoder_only, encoder_only, encoder_decoder  # noqa: F401  (registration order: docs order)
from src.models.families.base import FAMILIES, TransformerModel

__all__ = ["FAMILIES", "TransformerModel"]
