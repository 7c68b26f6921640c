"""Registered building blocks. Each registry imports every module of this package on its first
lookup (``src.registry``), so a variant in a new file needs no import line.

Notation used in shape comments throughout: B batch, T query length, S key length,
H query heads, K key/value heads, D head dim, C model dim (d_model), F FFN dim, V vocab.
"""

from src.models.components.differential import ATTENTIONS
from src.models.components.ffn import FFNS
from src.models.components.init import INITS
from src.models.components.masks import MASKS
from src.models.components.norms import NORMS
from src.models.components.positions import POSITIONS
from src.models.components.qk_norm import QK_NORMS
from src.models.components.residual import PLACEMENTS
from src.models.components.rope_scaling import ROPE_SCALINGS
from src.models.components.sinks import SINKS

__all__ = [
    "ATTENTIONS",
    "FFNS",
    "INITS",
    "MASKS",
    "NORMS",
    "POSITIONS",
    "PLACEMENTS",
    "QK_NORMS",
    "ROPE_SCALINGS",
    "SINKS",
]
