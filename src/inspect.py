"""Inspect an architecture without training it.

::

    python -m src.inspect                                  # GPT-2 small: tree, parameter table, FLOPs, memory
    python -m src.inspect model=llama_small model.n_layer=4
    python -m src.inspect pretrained=path/to/hf_dir        # a transformers checkpoint's config.json
    python -m src.inspect format=mermaid                   # the block diagram as a Mermaid flowchart
    python -m src.inspect attention pretrained=... text="The cat sat"   # attention heatmaps
    python -m src.inspect probes ckpt_path=.../last.ckpt                # induction heads, lens … (docs/probes.md)

The first positional argument picks a subcommand; each has its own Hydra config
(``conf/inspect.yaml``, ``conf/inspect_attention.yaml``) and the rest of the command line
are that config's overrides. The logic lives in ``src/inspection``; this file only wires it.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import hydra
import torch
from omegaconf import DictConfig
from rich.console import Console

from src.cli import cleanly
from src.config.preflight import preflight
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

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"

#: no subcommand: the model report; otherwise subcommand -> (Hydra config name, "module:function")
DEFAULT: tuple[str, str] = ("inspect", "src.inspect:run")
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "attention": ("inspect_attention", "src.inspection.attention_maps:run"),
    "probes": ("inspect_probes", "src.inspection.probes:run"),
}
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
            attention_memory(model, seq_len, cfg.dtype, int(cfg.get("batch_size", 1))),
            str(cfg.dtype),
        )
    )


def resolve(target: str) -> Callable[[DictConfig], None]:
    module, _, fn = target.partition(":")
    return getattr(importlib.import_module(module), fn)


def main(argv: Sequence[str] | None = None) -> None:
    """Dispatch on the first positional argument (a subcommand), then hand over to Hydra."""
    args = list(sys.argv[1:] if argv is None else argv)
    config_name, target = DEFAULT
    if args and args[0] in SUBCOMMANDS:
        config_name, target = SUBCOMMANDS[args.pop(0)]
    elif args and "=" not in args[0] and not args[0].startswith("-"):
        raise SystemExit(
            f"unknown subcommand '{args[0]}'; use one of: {', '.join(SUBCOMMANDS)} "
            f"(or none, for the model report), followed by key=value overrides"
        )
    sys.argv = [sys.argv[0], *args]
    preflight(config_name, args)
    # our errors as one message, others with their traceback (src/cli.py)
    hydra.main(config_path=str(CONF_DIR), config_name=config_name, version_base=None)(
        cleanly(resolve(target))
    )()


if __name__ == "__main__":
    main()
