"""A stored model config checked against the weights stored with it, before anything is allocated.

A checkpoint's ``hyper_parameters.cfg.model`` and a Hugging Face ``config.json`` are input: a
damaged or edited one (``vocab_size: 1e9``, ``n_layer: 1e6``) built as given would end in a raw
allocation error, a ``MemoryError`` after minutes, or the machine running out of memory layer by
layer. Every model this project builds holds, at least (C = d_model, L = layers, H heads
of D channels, F = d_ff, V = vocab_size, T = max_seq_len)::

    V·C                      token embedding (a tied head shares it)
    L · (2·C·H·D + 2·C·F)    per layer: the query and output projections, the FFN's two matrices
                             (F counts 0 with model/ffn=none: no FFN sublayer)
    + T·C                    with learned positions (the table)

So a config whose lower bound exceeds the number of elements in the weights it came with does not
describe them. ``check_sizes_fit`` refuses it, naming the key that inflates the bound most (the one
whose reduction to 1 shrinks it most), in microseconds and before any module exists.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torch import Tensor

from src.errors import CheckpointError
from src.models.components.ffn import FFNS, NoFFN
from src.models.config import ModelConfig

#: the size keys of a model config the bound reads
SIZE_KEYS = (
    "vocab_size",
    "d_model",
    "n_layer",
    "n_encoder_layer",
    "n_decoder_layer",
    "n_head",
    "d_head",
    "d_ff",
    "max_seq_len",
)


def min_parameters(sizes: dict[str, Any], learned_positions: bool) -> int:
    """The lower bound of the module docstring, from the size keys (``None``: the key's default)."""
    c, f, n_head = int(sizes["d_model"]), int(sizes["d_ff"]), int(sizes["n_head"])
    head_dim = int(sizes["d_head"]) if sizes.get("d_head") else c // max(1, n_head)
    n_layer = int(sizes["n_layer"])
    enc = int(sizes["n_encoder_layer"]) if sizes.get("n_encoder_layer") is not None else n_layer
    dec = int(sizes["n_decoder_layer"]) if sizes.get("n_decoder_layer") is not None else n_layer
    # decoder- or encoder-only: n_layer; encoder-decoder: both stacks
    layers = min(n_layer, enc + dec)
    bound = int(sizes["vocab_size"]) * c + layers * (2 * c * n_head * head_dim + 2 * c * f)
    return bound + (int(sizes["max_seq_len"]) * c if learned_positions else 0)


def config_sizes(cfg: ModelConfig) -> dict[str, Any]:
    """The size keys of ``cfg`` as the bound reads them: d_ff is 0 without an FFN sublayer."""
    sizes = {k: getattr(cfg, k) for k in SIZE_KEYS}
    return {**sizes, "d_ff": 0} if FFNS.get(cfg.ffn["name"]) is NoFFN else sizes


def weight_count(tensors: Iterable[Any]) -> int:
    """Elements in all the tensors (shared tensors counted each time: an upper bound is all this
    needs)."""
    return sum(t.numel() for t in tensors if isinstance(t, Tensor))


def check_sizes_fit(
    cfg: ModelConfig, n_weights: int, where: str, error: type[ValueError] = CheckpointError
) -> None:
    """``error`` when ``cfg`` needs more parameters than the ``n_weights`` stored with it in
    ``where``."""
    sizes = config_sizes(cfg)
    learned = cfg.position.get("name") == "learned"
    bound = min_parameters(sizes, learned)
    if bound <= n_weights:
        return
    shrink = {
        k: bound / max(1, min_parameters({**sizes, k: 1}, learned))
        for k in SIZE_KEYS
        if sizes[k] is not None
    }
    key = max(shrink, key=lambda k: shrink[k])
    raise error(
        f"{where}: model.{key}={sizes[key]} (with the config's other sizes) needs at least "
        f"{bound:,} parameters, but the weights stored with it hold {n_weights:,} values: the "
        "config does not describe these weights (damaged or edited); nothing was built. Restore "
        f"the config's {key}, or use the checkpoint or model directory it was written with"
    )


#: stated limits for a config read without weights beside it (``src.inspect pretrained=<dir>``,
#: which builds on the meta device): far above any published model (GPT-3 has 96 layers and 1.75e11
#: parameters), far below what a damaged config.json asks for (a million layers take minutes of
#: Python even without memory)
MAX_LAYERS = 4096
MAX_PARAMETERS = 10**13


def check_sizes_within_limits(
    cfg: ModelConfig, where: str, error: type[ValueError] = CheckpointError
) -> None:
    """``error`` naming the key when ``cfg`` has more than ``MAX_LAYERS`` layers in a stack or a
    lower bound of parameters over ``MAX_PARAMETERS``: for a config that comes without weights to
    check it against."""
    sizes = config_sizes(cfg)
    for key in ("n_layer", "n_encoder_layer", "n_decoder_layer"):
        if sizes[key] is not None and int(sizes[key]) > MAX_LAYERS:
            raise error(
                f"{where}: model.{key}={sizes[key]} is over the stated limit of {MAX_LAYERS:,} "
                "layers for a config read without its weights; nothing was built. Check the "
                "config (damaged or edited?)"
            )
    learned = cfg.position.get("name") == "learned"
    bound = min_parameters(sizes, learned)
    if bound > MAX_PARAMETERS:
        shrink = {
            k: bound / max(1, min_parameters({**sizes, k: 1}, learned))
            for k in SIZE_KEYS
            if sizes[k] is not None
        }
        key = max(shrink, key=lambda k: shrink[k])
        raise error(
            f"{where}: model.{key}={sizes[key]} (with the config's other sizes) needs at least "
            f"{bound:,} parameters, over the stated limit of {MAX_PARAMETERS:.0e} for a config "
            "read without its weights; nothing was built. Check the config (damaged or edited?)"
        )
