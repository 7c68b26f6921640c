"""Architecture families, registered by name (``model.family``)."""
from src.models.families import decoder_only, encoder_decoder, encoder_only  # noqa: F401
from src.models.families.base import FAMILIES, TransformerModel

__all__ = ["FAMILIES", "TransformerModel"]
