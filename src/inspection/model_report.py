"""The model report of ``python -m src.inspect`` (conf/inspect.yaml): the component tree, the
parameter table, FLOPs per token and attention memory of a model config or a transformers
checkpoint's ``config.json``, built on the meta device (shapes only); or its block diagram as a
Mermaid flowchart (``format=mermaid``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig
from rich.console import Console

from src.config.size_bounds import count
from src.errors import HFConversionError
from src.inspection.diagram import component_tree, model_mermaid
from src.inspection.params import (
    attention_memory,
    flops_per_token,
    parameter_table,
    render_parameter_table,
    render_summary,
)
from src.models import ModelConfig, build_model
from src.models.sizes import check_sizes_within_limits
from src.plain import to_plain

FORMATS = ("table", "mermaid")


def load_model_config(cfg: DictConfig) -> tuple[ModelConfig, str]:
    """The model config to inspect and where it came from.

    ``pretrained=<dir>`` reads that transformers checkpoint's ``config.json`` (through
    ``src.models.hf.config_from_hf``) and replaces ``model``; otherwise ``model`` is used.
    """
    if cfg.get("pretrained"):
        from src.models.hf import config_from_hf

        where = Path(str(cfg.pretrained))
        if (where / "config.json").is_file():
            # no transformers import needed
            hf_config: Any = json.loads((where / "config.json").read_text())
        else:  # a hub name (from the local cache when offline)
            from transformers import AutoConfig

            # never run Hub code
            hf_config = AutoConfig.from_pretrained(str(cfg.pretrained), trust_remote_code=False)
        model_cfg = config_from_hf(hf_config)
        # no weights are read here: absurd sizes in a damaged config.json are refused against a
        # stated limit
        check_sizes_within_limits(model_cfg, str(where / "config.json"), HFConversionError)
        model_cfg.name = where.name or model_cfg.name
        return model_cfg, f"pretrained={cfg.pretrained}"
    model_cfg = ModelConfig.from_dict(to_plain(cfg.model))
    return model_cfg, f"model={model_cfg.name}"


def run(cfg: DictConfig, console: Console | None = None) -> None:
    """Print the report for ``cfg`` (conf/inspect.yaml) to ``console`` (stdout by default)."""
    # Piped output gets 120 columns (rich's default is 80) unless COLUMNS says otherwise.
    console = console or Console(
        width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else 120
    )
    if cfg.format not in FORMATS:
        raise ValueError(f"format='{cfg.format}' is not known; use one of: {', '.join(FORMATS)}")
    # B of the attention-memory figure (arithmetic on the meta device: nothing is allocated)
    batch_size = count(
        "batch_size", cfg.get("batch_size", 1), "a positive number of sequences, e.g. 1"
    )
    model_cfg, source = load_model_config(cfg)
    if cfg.format == "mermaid":
        console.print(
            model_mermaid(model_cfg), markup=False, highlight=False, soft_wrap=True, end=""
        )
        return
    with torch.device("meta"):  # shapes only: no memory, no initialisation
        model = build_model(model_cfg)
    seq_len = int(cfg.seq_len) if cfg.get("seq_len") else model_cfg.max_seq_len
    table = parameter_table(model, expand_blocks=bool(cfg.get("expand_blocks", False)))
    title = f"{model_cfg.name} — {model_cfg.family}, from {source}"
    console.print(component_tree(model, title=f"[bold]{title}[/]"))
    console.print()
    console.print(render_parameter_table(table, title="Parameters by component"))
    console.print(
        render_summary(
            table.total,
            flops_per_token(model, seq_len),
            attention_memory(model, seq_len, cfg.dtype, batch_size),
            str(cfg.dtype),
        )
    )
