"""Evaluate a pretrained model or one of our checkpoints on benchmarks.

    python -m src.eval pretrained=gpt2 benchmarks=[lambada,hellaswag] limit=500
    python -m src.eval ckpt_path=outputs/.../checkpoints/last.ckpt benchmarks=[perplexity] benchmarks.perplexity.path=valid.txt

Benchmarks are the ``conf/benchmarks`` group (select several: ``benchmarks=[a,b]``; set their keys:
``benchmarks.<name>.<key>=...``). Writes ``metrics.json`` to the run directory and prints a
table. See docs/evaluation.md.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import hydra
import torch
from omegaconf import DictConfig, OmegaConf

from src.cli import clean_errors
from src.config.preflight import preflight
from src.evaluation.benchmarks import Benchmark, build_benchmark
from src.evaluation.loading import load_model
from src.evaluation.scorer import Scorer
from src.evaluation.suite import metrics_dict, print_results, run_benchmarks
from src.jsonfile import METRICS, write_json

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


def build_benchmarks(benchmarks_cfg: Any) -> dict[str, Benchmark]:
    """``cfg.benchmarks`` (entry name -> config node) -> built benchmarks, in the selected order."""
    if not benchmarks_cfg:
        available = sorted(p.stem for p in (CONF_DIR / "benchmarks").glob("*.yaml"))
        raise ValueError(
            "no benchmarks selected; choose some, e.g. benchmarks=[lambada,hellaswag] (available: "
            f"{', '.join(available)})"
        )
    plain = (
        OmegaConf.to_container(benchmarks_cfg, resolve=True)
        if isinstance(benchmarks_cfg, DictConfig)
        else dict(benchmarks_cfg)
    )
    return {name: build_benchmark(name, node) for name, node in plain.items()}  # type: ignore[union-attr]


def evaluate(cfg: DictConfig, run_dir: Path | None = None) -> dict[str, Any]:
    """Run the configured benchmarks; return (and, with ``run_dir``, write) the metrics.json content."""
    start = time.perf_counter()
    benchmarks = build_benchmarks(
        cfg.get("benchmarks")
    )  # config errors surface before the model is loaded
    torch.manual_seed(cfg.seed)
    loaded = load_model(cfg.pretrained, cfg.ckpt_path, cfg.tokenizer, cfg.device, cfg.dtype)
    scorer = Scorer(
        loaded.model,
        loaded.tokenizer,
        batch_size=cfg.batch_size,
        max_batch_tokens=cfg.max_batch_tokens,
        show_progress=cfg.progress,
        pair_format=loaded.pair_format,
        mask_token_id=loaded.mask_token_id,
    )
    results = run_benchmarks(scorer, benchmarks, cfg.limit)
    print_results(
        results,
        title=f"{loaded.source} ({loaded.model.config.name}, {loaded.model.num_parameters():,} parameters)",
    )
    wall = time.perf_counter() - start
    metrics = metrics_dict(
        results,
        model=loaded.source,
        model_name=loaded.model.config.name,
        family=loaded.model.config.family,
        params=loaded.model.num_parameters(),
        tokenizer=loaded.tokenizer.name,
        device=str(scorer.device),
        dtype=cfg.dtype,
        limit=cfg.limit,
        wall_time_s=round(wall, 3),
        throughput_tokens_per_s=scorer.tokens_read / wall if wall > 0 else None,
    )
    if run_dir is not None:
        write_json(Path(run_dir) / METRICS, metrics)
    return metrics


@hydra.main(version_base="1.3", config_path="../conf", config_name="eval")
def main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

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
