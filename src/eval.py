"""Evaluate a pretrained model or one of our checkpoints on benchmarks.

    python -m src.eval pretrained=gpt2 benchmarks=[lambada,hellaswag] limit=500
    python -m src.eval ckpt_path=outputs/.../checkpoints/last.ckpt benchmarks=[perplexity] benchmarks.perplexity.path=valid.txt

Benchmarks are the ``conf/benchmarks`` group (select several: ``benchmarks=[a,b]``; set their keys:
``benchmarks.<name>.<key>=...``). Writes ``metrics.json`` to the run directory and prints a
table. See docs/evaluation.md.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from src.cli import hydra_entry
from src.jsonfile import METRICS, write_json


@hydra_entry("eval")
def main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    from src.evaluation.evaluate import evaluate  # the evaluation stack loads here, not at import

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        evaluate(cfg, run_dir)
    except Exception as e:
        write_json(run_dir / METRICS, {"status": "failed", "error": f"{type(e).__name__}: {e}"})
        raise
    print(f"\nresults: {run_dir / METRICS}\nrun directory: {run_dir}", flush=True)


if __name__ == "__main__":
    main()
