"""Model inspection without training: parameter tables, FLOPs and memory, block diagrams, attention
maps (``python -m src.inspect``)."""
