"""Mechanistic probes of a model's attention and residual stream (``docs/probes.md``).

Plain functions on a ``TransformerModel`` (any family, any position): induction and previous-token
heads, attention entropy and sinks (``attention.py``), the logit lens and the in-context-learning
score (``lens.py``), on a fixed batch of repeated random tokens (``batch.py``); ``suite.py`` runs
them all and names the figures. The training callback (``src.callbacks.probes``) and ``python -m
src.inspect probes`` (``src.inspection.probes``) call them."""

from src.probes.batch import ProbeBatch, probe_batch
from src.probes.suite import ProbeResult, run_probes

__all__ = ["ProbeBatch", "ProbeResult", "probe_batch", "run_probes"]
