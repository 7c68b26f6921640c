"""Registered building blocks. Importing this package registers every built-in variant.

Notation used in shape comments throughout: B batch, T query length, S key length,
H query heads, K key/value heads, D head dim, C model dim (d_model), F FFN dim, V vocab.
"""
from src.models.components import attention, ffn, masks, norms, positions, residual  # noqa: F401
from src.models.components.ffn import FFNS
from src.models.components.masks import MASKS
from src.models.components.norms import NORMS
from src.models.components.positions import POSITIONS
from src.models.components.residual import PLACEMENTS

__all__ = ["FFNS", "MASKS", "NORMS", "POSITIONS", "PLACEMENTS"]
