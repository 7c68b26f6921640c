"""Evaluate a pretrained model or one of our checkpoints on benchmarks.

    python -m src.eval pretrained=gpt2 benchmarks=[lambada,hellaswag] limit=500
    python -m src.eval ckpt_path=outputs/.../checkpoints/last.ckpt benchmarks=[perplexity] benchmarks.perplexity.path=valid.txt

Benchmarks are the ``conf/benchmarks`` group (select several: ``benchmarks=[a,b]``; set their keys:
``benchmarks.<name>.<key>=...``). Writes ``metrics.json`` to the run directory and prints a
table. See docs/evaluation.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from src.cli import clean_errors
from src.config.preflight import preflight
from src.jsonfile import METRICS, write_json


@hydra.main(version_base="1.3", config_path="../conf", config_name="eval")
def main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    from src.evaluation.evaluate import evaluate  # the evaluation stack loads here, not at import

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    with clean_errors():  # our errors as one message, others with their traceback (src/cli.py)
        try:
            evaluate(cfg, run_dir)
        except Exception as e:
            write_json(run_dir / METRICS, {"status": "failed", "error": f"{type(e).__name__}: {e}"})
            raise
    print(f"\nresults: {run_dir / METRICS}\nrun directory: {run_dir}", flush=True)


if __name__ == "__main__":
    preflight("eval", sys.argv[1:])
    main()
