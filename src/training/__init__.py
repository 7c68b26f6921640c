"""Training orchestration: run setup (config -> tokenizer, data, task, trainer), the run
itself with its metrics.json, DDP/Hydra integration, strategy builders."""

from src.training.devices import register_resolvers

register_resolvers()  # ${device_precision:...} in conf/trainer/default.yaml
