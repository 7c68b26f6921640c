"""The run config, validated once into a frozen RunSpec (validate, part_checks, spec) and resolved
against the tokenizer; the trainer/hardware checks (trainer_checks); the command line's checks before
Hydra starts (preflight)."""
