"""Training objectives, one LightningModule each, registered by name (``objective=<name>``):

* ``causal_lm`` — decoder-only next-token prediction (optionally a prefix LM),
* ``masked_lm`` — encoder-only BERT-style masked LM,
* ``seq2seq`` — encoder-decoder on translation pairs or prefix -> continuation text,
* ``decoder_translation`` — decoder-only on ``src <sep> tgt`` with loss on the target.
"""

from src.objectives.base import LMTask, Prepared
from src.objectives.registry import OBJECTIVES
from src.objectives.special_ids import SpecialIds

__all__ = ["OBJECTIVES", "LMTask", "Prepared", "SpecialIds"]
