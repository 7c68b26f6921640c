"""Attention heatmaps: what each token attends to, per layer and head.

::

    python -m src.inspect attention pretrained=gpt2 text="The cat sat on the mat because it was tired."
    python -m src.inspect attention ckpt_path=outputs/.../checkpoints/last.ckpt text="ROMEO:" layers=[0,-1] heads=[0,3]

The model runs the explicit attention path (``output_attentions=True``), which returns the
softmax probabilities [B, H, T, S] of every layer. For each selected layer we save one PNG
with a grid of the selected heads (query tokens down the rows, key tokens along the
columns; each row sums to one) and the matrices themselves (``.npy`` per layer and one
``attention.pt`` holding everything, with the token labels). An encoder-decoder gives
three kinds of map: encoder self-attention, decoder self-attention (over ``target``,
teacher-forced) and cross-attention (decoder queries, encoder keys).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from torch import Tensor

from src.data.tokenizers import Tokenizer
from src.files import atomic_path
from src.models.families import TransformerModel


@dataclass
class AttentionMap:
    """The probabilities of one attention layer for one input."""

    kind: str  # "self" (decoder-only / encoder-only), "encoder", "decoder" or "cross"
    layer: int
    probs: Tensor  # [H, T, S], float32 on CPU; rows sum to one
    queries: list[str]  # T labels
    keys: list[str]  # S labels

    @property
    def name(self) -> str:
        return f"layer {self.layer}" if self.kind == "self" else f"{self.kind} layer {self.layer}"

    @property
    def stem(self) -> str:
        """File name stem: ``layer03``, ``cross_layer03`` …"""
        return (
            f"layer{self.layer:02d}"
            if self.kind == "self"
            else f"{self.kind}_layer{self.layer:02d}"
        )


def token_labels(tokenizer: Tokenizer | None, ids: Sequence[int]) -> list[str]:
    """One readable label per token id (the id itself when there is no tokenizer)."""
    labels = []
    for i in ids:
        text = tokenizer.decode([int(i)]) if tokenizer is not None else ""
        text = text.replace("\n", "\\n").replace("\t", "\\t")
        labels.append(text if text.strip() else (repr(text) if text else f"<{int(i)}>"))
    return labels


def select(indices: Sequence[int] | None, n: int, what: str) -> list[int]:
    """Indices into range(n); negative ones count from the end; None selects all."""
    if indices is None:
        return list(range(n))
    chosen = []
    for i in indices:
        if not -n <= int(i) < n:
            raise ValueError(
                f"{what} {i} does not exist: the model has {n} {what}s (0..{n - 1}, or -1 for the "
                "last)"
            )
        chosen.append(int(i) % n)
    return chosen


@torch.no_grad()
def attention_maps(
    model: TransformerModel,
    input_ids: Tensor,
    tokenizer: Tokenizer | None = None,
    decoder_input_ids: Tensor | None = None,
    layers: Sequence[int] | None = None,
    prefix_length: Tensor | None = None,
) -> list[AttentionMap]:
    """The attention maps of the first example in ``input_ids`` [B, T], for the chosen layers.

    ``decoder_input_ids`` [B, T']: the decoder's input of an encoder-decoder (default: its start
    token alone); ``prefix_length`` [B]: the bidirectional prefix of a prefix-LM decoder.
    """
    model.eval()
    collected = model.attention_probs(
        input_ids, decoder_input_ids=decoder_input_ids, prefix_length=prefix_length
    )
    maps: list[AttentionMap] = []
    for kind in dict.fromkeys(a.kind for a in collected):  # kinds in order
        of_kind = [a for a in collected if a.kind == kind]
        for index in select(layers, len(of_kind), "layer"):
            a = of_kind[index]
            maps.append(
                AttentionMap(
                    kind,
                    a.layer,  # the stack's layer (a mixer layer has no map: see no_map_reasons)
                    a.probs[0].float().cpu(),
                    token_labels(tokenizer, a.queries[0].tolist()),
                    token_labels(tokenizer, a.keys[0].tolist()),
                )
            )
    return maps


def no_map_reasons(model: TransformerModel) -> list[str]:
    """Why each layer without an attention map has none (a token mixer other than attention,
    ``model/mixer``): "not applicable" lines for the console."""
    return [
        f"{name} layer {i}: not applicable, {block.attn.registry_name} has no attention map"
        for name, stack in model.stacks().items()
        for i, block in enumerate(stack.blocks)
        if block.recurrent
    ]


def plot_heads(amap: AttentionMap, heads: Sequence[int], path: Path, title: str = "") -> Path:
    """Save a grid of heatmaps (one per head) with token labels on both axes as a PNG."""
    from matplotlib.figure import Figure  # the object API: no pyplot state, no display needed

    n = len(heads)
    ncols = min(n, 4)
    nrows = math.ceil(n / ncols)
    T, S = amap.probs.shape[-2:]
    cell = max(2.5, 0.22 * max(T, S) + 1.0)  # inches per heatmap: room for the labels
    fig = Figure(figsize=(ncols * cell + 1.0, nrows * cell + 0.8), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    image = None
    for ax, h in zip(axes.flat, heads):
        image = ax.imshow(amap.probs[h].numpy(), vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
        ax.set_title(f"head {h}", fontsize=9)
        fontsize = 7 if max(T, S) <= 24 else 5
        ax.set_xticks(range(S), amap.keys, rotation=90, fontsize=fontsize)
        ax.set_yticks(range(T), amap.queries, fontsize=fontsize)
        ax.set_xlabel("key", fontsize=8)
        ax.set_ylabel("query", fontsize=8)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.6, label="attention probability")
    fig.suptitle(title or amap.name)
    with atomic_path(path, suffix=Path(path).suffix) as tmp:
        fig.savefig(tmp, dpi=110)
    return path


def save_maps(
    maps: list[AttentionMap],
    heads: Sequence[int] | None,
    out_dir: Path,
    title: str = "",
    meta: dict[str, Any] | None = None,
) -> list[Path]:
    """PNG + .npy per map (selected heads), and ``attention.pt`` with every map and the labels."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for m in maps:
        chosen = select(heads, m.probs.shape[0], "head")
        written.append(
            plot_heads(
                m, chosen, out_dir / f"{m.stem}.png", f"{title} — {m.name}" if title else m.name
            )
        )
        with atomic_path(out_dir / f"{m.stem}.npy", suffix=".npy") as tmp:
            np.save(tmp, m.probs[chosen].numpy())  # [h, T, S]
        written.append(out_dir / f"{m.stem}.npy")
    bundle = {
        "maps": {m.stem: m.probs for m in maps},  # [H, T, S] each, all heads
        "queries": {m.stem: m.queries for m in maps},
        "keys": {m.stem: m.keys for m in maps},
        "meta": meta or {},
    }
    with atomic_path(out_dir / "attention.pt") as tmp:
        torch.save(bundle, tmp)
    written.append(out_dir / "attention.pt")
    return written


def run(cfg: DictConfig) -> list[Path]:
    """The ``python -m src.inspect attention`` entry point (conf/inspect_attention.yaml)."""
    from rich.console import Console

    from src.evaluation.loading import load_model

    console = Console()
    tokenizer_cfg = (
        OmegaConf.to_container(cfg.tokenizer, resolve=True) if cfg.get("tokenizer") else None
    )
    loaded = load_model(
        cfg.get("pretrained"), cfg.get("ckpt_path"), tokenizer_cfg, cfg.device, cfg.dtype
    )  # type: ignore[arg-type]
    model, tok = loaded.model, loaded.tokenizer
    device = next(model.parameters()).device
    ids = tok.encode(str(cfg.text))
    if not ids:
        raise ValueError(
            "text='' has no tokens; give the sentence to look at: text=\"The cat sat on the mat.\""
        )
    if len(ids) > int(cfg.max_tokens):
        raise ValueError(
            f"text has {len(ids)} tokens; heatmaps above max_tokens={cfg.max_tokens} are "
            "unreadable. Shorten the text or raise max_tokens"
        )
    input_ids = torch.tensor([ids], device=device)  # [1, T]
    decoder_input_ids = None
    # the decoder reads its start token, then the target (teacher-forced)
    if model.prompt_is_source:
        target = torch.tensor(
            [tok.encode(str(cfg.target)) if cfg.get("target") else []],
            dtype=torch.long,
            device=device,
        )
        decoder_input_ids = torch.cat([model.start_tokens(1, device), target], dim=1)  # [1, 1 + T']
    elif cfg.get("target"):
        raise ValueError(
            f"target= is the decoder's text of an encoder-decoder; this {model.config.family} "
            "model reads only text=. Drop target="
        )
    prefix = (
        torch.tensor([int(cfg.prefix_length)], device=device) if cfg.get("prefix_length") else None
    )
    maps = attention_maps(model, input_ids, tok, decoder_input_ids, cfg.get("layers"), prefix)
    out_dir = Path(str(cfg.out_dir))
    meta = {
        "source": loaded.source,
        "text": str(cfg.text),
        "target": cfg.get("target"),
        "input_ids": ids,
    }
    written = save_maps(maps, cfg.get("heads"), out_dir, title=loaded.source, meta=meta)
    console.print(
        f"{loaded.source}: {len(ids)} tokens, {len(maps)} attention maps -> {out_dir}/",
        soft_wrap=True,
    )
    for path in written:
        console.print(f"  {path}", soft_wrap=True, highlight=False)
    for line in no_map_reasons(model):
        console.print(f"  {line}", soft_wrap=True, highlight=False)
    return written
