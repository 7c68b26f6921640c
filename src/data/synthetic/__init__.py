"""Synthetic diagnostic tasks: examples generated from (seed, split, index), no files
(docs/synthetic.md).

``base``: what a task is (``SyntheticSource``: a prompt and its answer, one character per token) and
the split rule; ``datamodule``: the batches. The tasks themselves are data sources registered in
``src/data/sources/`` (copy, reverse, sort, addition, induction, mqar, selective_copy).
"""
