"""Full checkpoints (one ``.ckpt`` file) under ``trainer=fsdp2``, portable to and from one process.

A one-process run's checkpoint holds the optimizer's states keyed by torch's own ids: the
position of each parameter in the optimizer's groups, in order. Lightning's
``ModelParallelStrategy`` writes and reads ids in the module's parameter order instead, and the
two differ as soon as the optimizer has several groups (decayed matrices, then the rest), so a
checkpoint could not move between ``trainer=cpu`` and ``trainer=fsdp2``. Here both directions
use torch's order:

* ``optimizer_state_by_ids``: the gathered, name-keyed state (``get_optimizer_state_dict``)
  written with torch's ids, as ``optimizer.state_dict()`` would be in one process;
* ``load_full``: the weights through Lightning's loader, the optimizer's states keyed back to
  names by the live optimizer's groups and distributed by ``set_optimizer_state_dict``.

Lightning's loader cuts every tensor into contiguous row blocks; a strided split (the fused qkv
by heads under tensor parallelism, ``FusedColwiseParallel``) holds rows from each of q, k and v,
so those parameters and their optimizer states are written again through DTensor's own
distribution (``_put``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from src.models.components.tensor_parallel import is_strided


def optimizer_state_by_ids(named: dict[str, Any]) -> dict[str, Any]:
    """A name-keyed optimizer state dict -> torch's layout: ids numbered through the groups."""
    if not named:  # ranks > 0 of a gathered (full) state
        return named
    ids: dict[str, int] = {}
    groups = []
    for group in named["param_groups"]:
        numbered = [ids.setdefault(name, len(ids)) for name in group["params"]]
        groups.append({**group, "params": numbered})
    return {"state": {ids[n]: v for n, v in named["state"].items()}, "param_groups": groups}


def _names_in_optimizer_order(module: nn.Module, optimizer: Any) -> list[str]:
    fqn = {id(p): n for n, p in module.named_parameters()}
    return [fqn[id(p)] for group in optimizer.param_groups for p in group["params"]]


def _put(dst: Any, full: torch.Tensor) -> None:
    """This rank's part of ``full`` into the DTensor ``dst``, by DTensor's own placement rules."""
    from torch.distributed.tensor import distribute_tensor

    part = distribute_tensor(full, dst.device_mesh, dst.placements, src_data_rank=None)
    dst.to_local().copy_(part.to_local())


def load_full(
    checkpoint: dict[str, Any], module: nn.Module, optimizers: list[Any], strict: bool
) -> dict[str, Any]:
    """A full checkpoint (read by the strategy's CheckpointIO: weights-only, verified) into the
    sharded ``module`` and its ``optimizers``; returns the rest of the checkpoint (the loops',
    callbacks' and schedulers' states) for Lightning."""
    from lightning.fabric.strategies.model_parallel import _load_raw_module_state
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    weights = checkpoint.pop("state_dict")
    _load_raw_module_state(weights, module, strict=strict)
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True, strict=strict)
    saved = checkpoint.get("optimizer_states", [])
    for optimizer, state in zip(optimizers, saved, strict=False):
        names = _names_in_optimizer_order(module, optimizer)
        named = {
            "state": {names[i]: v for i, v in state["state"].items()},
            "param_groups": [
                {**g, "params": [names[i] for i in g["params"]]} for g in state["param_groups"]
            ],
        }
        set_optimizer_state_dict(module, optimizer, optim_state_dict=named, options=options)
    with torch.no_grad():  # the strided splits, again (see the module docstring)
        for name, p in module.named_parameters():
            if is_strided(p):
                _put(p, weights[name])
        for optimizer, state in zip(optimizers, saved, strict=False):
            order = [p for group in optimizer.param_groups for p in group["params"]]
            for i, p in enumerate(order):
                for key, value in optimizer.state.get(p, {}).items() if is_strided(p) else ():
                    if is_strided(value):  # exp_avg, exp_avg_sq: the parameter's shape and split
                        _put(value, state["state"][i][key])
    return checkpoint
