"""The study layer: the protocol (declared questions, tuning, seeds), reading a sweep's runs,
planning a study's compute, budgets and parameter matching, power-law fits, and exporting a
study's finished runs (docs/studies.md). Per-run infrastructure lives in ``src.runs``."""
