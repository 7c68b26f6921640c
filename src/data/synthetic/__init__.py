"""Synthetic diagnostic tasks: examples generated from (seed, split, index), no files
(docs/synthetic.md).

``base``: what a task is (``SyntheticSource``: a prompt and its answer, one character per token) and
the split rule; ``datamodule``: the batches; beside them, the tasks, each a data source registered
in ``SOURCES``: ``strings`` (copy, reverse, sort), ``addition``, ``induction``, ``mqar``,
``selective_copy``.
"""
