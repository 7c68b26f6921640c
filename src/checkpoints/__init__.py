"""Checkpoints: atomic, verified writes (io), loading for evaluation (load), fit and same-run checks
(fit)."""
