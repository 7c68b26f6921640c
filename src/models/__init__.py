"""Models: registered components, three families, the builder, HF interop, generation."""

from src.models.builder import build_model
from src.models.config import ModelConfig
from src.models.families import FAMILIES, TransformerModel
from src.models.outputs import ModelOutput

__all__ = ["build_model", "ModelConfig", "FAMILIES", "TransformerModel", "ModelOutput"]
