"""Data: tokenizers, datasets, datamodules."""
