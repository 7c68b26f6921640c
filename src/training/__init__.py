"""Training orchestration: run setup (config -> tokenizer, data, task, trainer), the run
itself with its metrics.json, DDP/Hydra integration, strategy builders."""
