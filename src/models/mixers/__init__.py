"""Sequence mixers: the token-mixing sublayer of a block (attention and its sub-quadratic replacements)."""
