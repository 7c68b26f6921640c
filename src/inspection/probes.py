"""``python -m src.inspect probes``: the mechanistic probes of one model, per layer and head.

::

    python -m src.inspect probes ckpt_path=outputs/.../checkpoints/last.ckpt
    python -m src.inspect probes pretrained=path/to/hf_dir length=64 batch_size=16

Loads one of our checkpoints or a transformers model (``src.models.hf.from_hf``; no tokenizer is
needed: the probe batch is random token ids), runs ``src.probes.run_probes`` on the same fixed batch
the training callback uses (``seed``, ``length``, ``batch_size``) and prints a rich table per kind
of attention (layer, head, induction, previous token, entropy, sink), the logit lens per layer and
the model-level figures. docs/probes.md defines each number."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
from omegaconf import DictConfig
from rich.console import Console
from rich.table import Table

from src.config.size_bounds import Memory, check_probe_memory, count, seed
from src.errors import ConfigError
from src.evaluation.loading import resolve_device, resolve_dtype
from src.models.families import TransformerModel
from src.probes import ProbeResult, probe_batch, run_probes
from src.probes.batch import default_length
from src.probes.suite import check_positions

TITLES = {
    "": "self-attention of the stack the head reads",
    "enc.": "encoder self-attention",
    "cross.": "cross-attention",
}


def load(pretrained: str | None, ckpt_path: str | None) -> tuple[TransformerModel, str]:
    """Exactly one of a transformers model (directory or cached Hub name) and one of our
    checkpoints."""
    if (pretrained is None) == (ckpt_path is None):
        raise ConfigError(
            "set exactly one of pretrained=<transformers directory or hub name> or "
            "ckpt_path=<checkpoint .ckpt>"
            + (
                f"; got both (pretrained={pretrained}, ckpt_path={ckpt_path})"
                if pretrained and ckpt_path
                else ""
            )
        )
    if ckpt_path is not None:
        from src.checkpoints.load import load_checkpoint

        return load_checkpoint(str(Path(ckpt_path).expanduser())).model, f"ckpt_path={ckpt_path}"
    from src.models.hf import from_hf

    return from_hf(str(pretrained)), f"pretrained={pretrained}"


def _cell(x: torch.Tensor | None, h: int) -> str:
    return "–" if x is None else f"{float(x[h]):.3f}"


def head_tables(result: ProbeResult) -> list[Table]:
    """One table per kind of attention: a row per layer and head."""
    tables = []
    for prefix, layers in result.entropy.items():
        own = prefix == ""
        table = Table(title=TITLES.get(prefix, prefix), header_style="bold")
        for name in ("layer", "head", "induction", "prev. token", "entropy", "sink"):
            table.add_column(name, justify="right")
        for i, entropy in enumerate(layers):
            induction = result.induction[i] if own and result.induction else None
            prev = result.prev_token[i] if own and result.prev_token else None
            for h in range(entropy.shape[0]):
                table.add_row(
                    str(result.layer(prefix, i)),
                    str(h),
                    _cell(induction, h),
                    _cell(prev, h),
                    _cell(entropy, h),
                    _cell(result.sink[prefix][i], h),
                )
        tables.append(table)
    return tables


def summary_table(result: ProbeResult) -> Table:
    table = Table(title="per layer and model", header_style="bold")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for layer, loss in enumerate(result.lens_loss):
        table.add_row(f"probe/lens_loss@L{layer}", f"{loss:.4f}")
    if result.model_loss is not None:
        table.add_row("model loss (= the last layer's lens)", f"{result.model_loss:.4f}")
    for key in ("probe/induction_max", "probe/prev_token_max", "probe/icl_score"):
        value = result.metrics().get(key)
        if value is not None:
            table.add_row(key, f"{value:.4f}")
    return table


def run(cfg: DictConfig, console: Console | None = None) -> ProbeResult:
    """The ``python -m src.inspect probes`` entry point (conf/inspect_probes.yaml)."""
    console = console or Console(
        width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else 120
    )
    # before the model loads; the batch against memory once its sizes are known
    batch_size = count("batch_size", cfg.batch_size, "a positive number of sequences, e.g. 16")
    seed("seed", cfg.seed)
    model, source = load(cfg.get("pretrained"), cfg.get("ckpt_path"))
    length = int(cfg.length) if cfg.get("length") is not None else default_length(model)
    check_probe_memory("batch_size", batch_size, model.config, length, Memory.detect())
    model = model.to(device=resolve_device(cfg.device), dtype=resolve_dtype(cfg.dtype)).eval()
    batch = probe_batch(model, batch_size, length, int(cfg.seed))
    icl = None
    if cfg.get("icl_early") is not None or cfg.get("icl_late") is not None:
        icl = (int(cfg.icl_early), int(cfg.icl_late))
        try:
            check_positions(*icl, length)
        except ValueError as e:
            raise ConfigError(
                f"icl_early={icl[0]}, icl_late={icl[1]}: {e}; give positions of the probe sequence"
            ) from None
    with torch.no_grad():
        result = run_probes(model, batch, icl)
    console.print(
        f"[bold]{source}[/] — {model.config.family}, {batch.tokens.shape[0]} sequences of {length} "
        f"tokens (two copies of {batch.period} distinct random tokens, seed {cfg.seed})",
        soft_wrap=True,
    )
    for table in head_tables(result):
        console.print(table)
    console.print(summary_table(result))
    for probe, why in result.skipped.items():
        console.print(f"skipped {probe}: {why}", soft_wrap=True, highlight=False)
    return result
