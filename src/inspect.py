"""Inspect an architecture without training it.

::

    python -m src.inspect                                  # GPT-2 small: tree, parameter table, FLOPs, memory
    python -m src.inspect model=llama_small model.n_layer=4
    python -m src.inspect pretrained=path/to/hf_dir        # a transformers checkpoint's config.json
    python -m src.inspect format=mermaid                   # the block diagram as a Mermaid flowchart
    python -m src.inspect attention pretrained=... text="The cat sat"   # attention heatmaps
    python -m src.inspect probes ckpt_path=.../last.ckpt                # induction heads, lens … (docs/probes.md)
    python -m src.inspect coord_check model=tiny widths=[32,64,128,256]  # μP's coordinate check
    python -m src.inspect memory trainer=fsdp2 trainer.devices=8 model=gpt2_xl  # bytes per device

The first positional argument picks a subcommand; each has its own Hydra config
(``conf/inspect.yaml``, ``conf/inspect_attention.yaml``) and the rest of the command line
are that config's overrides. The logic lives in ``src/inspection``; this file only wires it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

from omegaconf import DictConfig

from src.cli import hydra_entry

#: no subcommand: the model report; otherwise subcommand -> (Hydra config name, "module:function");
#: the module loads (torch, the model stack) after the command line is checked
DEFAULT: tuple[str, str] = ("inspect", "src.inspection.model_report:run")
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "attention": ("inspect_attention", "src.inspection.attention_maps:run"),
    "probes": ("inspect_probes", "src.inspection.probes:run"),
    "coord_check": ("inspect_coord_check", "src.inspection.coord_check:run"),
    "memory": ("inspect_memory", "src.inspection.memory:run"),
}


def resolve(target: str) -> Callable[[DictConfig], None]:
    """The task ``"module:function"``, imported when Hydra calls it (after the preflight checks);
    named after its module, as Hydra names the job."""
    module, _, fn = target.partition(":")

    def task(cfg: DictConfig) -> None:
        return getattr(importlib.import_module(module), fn)(cfg)

    task.__module__, task.__name__, task.__qualname__ = module, fn, fn
    return task


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
    hydra_entry(config_name)(resolve(target))(args)


if __name__ == "__main__":
    main()
