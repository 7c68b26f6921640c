"""One evaluation of ``python -m src.eval``: the benchmarks built from the config (before any model
is loaded), the model, the scorer, the results table and metrics.json."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from src.evaluation.benchmarks import Benchmark, build_benchmark
from src.evaluation.loading import load_model
from src.evaluation.scorer import Scorer
from src.evaluation.suite import metrics_dict, print_results, run_benchmarks
from src.jsonfile import METRICS, write_json

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


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
    # config errors surface before the model is loaded
    benchmarks = build_benchmarks(cfg.get("benchmarks"))
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
