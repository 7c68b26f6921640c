"""Analysis tools: parameter tables, FLOPs and memory estimates, block diagrams, attention maps."""
