"""transformer-lab: a modular Hydra + Lightning framework for comparing Transformer
architectures."""
