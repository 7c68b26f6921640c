"""Registered building blocks. Importing this package registers every built-in variant.

Notation used in shape comments throughout: B batch, T query length, S key length,
H query heads, K key/value heads, D head dim, C model dim (d_model), F FFN dim, V vocab.
"""
from src.models.components import attention, ffn, masks, norms, positions, residual  # noqa: F401
from src.models.components import sandwich  # noqa: F401,I001  (placements register in the order the docs list them)
from src.models.components import deepnorm  # noqa: F401
from src.models.components import rezero  # noqa: F401
from src.models.components import qk_norm, rope_scaling, t5_bias  # noqa: F401
from src.models.components.ffn import FFNS
from src.models.components.masks import MASKS
from src.models.components.norms import NORMS
from src.models.components.positions import POSITIONS
from src.models.components.qk_norm import QK_NORMS
from src.models.components.residual import PLACEMENTS
from src.models.components.rope_scaling import ROPE_SCALINGS

__all__ = ["FFNS", "MASKS", "NORMS", "POSITIONS", "PLACEMENTS", "QK_NORMS", "ROPE_SCALINGS"]
