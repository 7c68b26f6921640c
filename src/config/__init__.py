"""The run config, validated once before anything heavy is built (validate), the trainer/hardware
checks (trainer_checks), the output-directory check Hydra runs first (output_dir)."""
