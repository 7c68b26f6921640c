"""Training callbacks (instantiated from ``conf/callbacks/*.yaml`` by ``_target_``)."""

from src.callbacks.fingerprint import Fingerprint
from src.callbacks.sample_text import SampleText
from src.callbacks.summary import ModelSummary, RunSummary
from src.callbacks.throughput import TokensPerSecondBar, TokenThroughput

__all__ = [
    "Fingerprint",
    "ModelSummary",
    "RunSummary",
    "SampleText",
    "TokenThroughput",
    "TokensPerSecondBar",
]
