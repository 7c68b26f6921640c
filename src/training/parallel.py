"""What a parallel strategy does to a built model, in torchtitan's order (``parallelize_llama``):
activation checkpointing, then FSDP2 — each on the units the model itself declares
(``TransformerModel.parallel_blocks()``), never by matching parameter names.

* ``checkpoint_blocks``: each block's forward recomputed in the backward pass (Chen et al. 2016,
  "Training Deep Nets with Sublinear Memory Cost"), for every strategy (``trainer.
  activation_checkpointing``). The module tree and state-dict keys stay as they are.
* ``parallelize``: the model's tensor-parallel plan over the mesh's tensor-parallel dimension
  (``TransformerModel.tensor_parallel_plan``; Shoeybi et al. 2019, Megatron-LM), then
  ``fully_shard`` per block and on the root over the data-parallel dimension (Zhao et al. 2023,
  PyTorch FSDP; FSDP2 = per-parameter DTensor sharding).
* ``check_tensor_parallel``: the plan exists for this model, checked in the launching process
  before any other starts.
"""

from __future__ import annotations

import functools
from typing import Any

from lightning.pytorch.callbacks import Callback
from torch import nn
from torch.utils.checkpoint import checkpoint

from src.errors import ConfigError


def blocks_of(model: nn.Module, key: str) -> list[nn.Module]:
    """The model's declared blocks; a ``ConfigError`` naming ``key`` when it declares none."""
    blocks = list(model.parallel_blocks())
    if not blocks:
        raise ConfigError(
            f"{key} wraps a model block by block, but this {type(model).__name__} declares no "
            "blocks (parallel_blocks() is empty); give the model layers (model.n_layer >= 1), or "
            "use trainer=ddp / trainer=cpu"
        )
    return blocks


def checkpoint_blocks(model: nn.Module) -> int:
    """Recompute each block's activations in the backward pass instead of keeping them: only each
    block's input stays alive ([B, T, C] per block). Non-reentrant ``torch.utils.checkpoint``
    (works with DDP, FSDP2 and kwargs; the RNG state is replayed, so dropout matches). The block's
    ``forward`` is replaced on the instance, so parameters keep their names. Returns how many
    blocks; idempotent."""
    blocks = blocks_of(model, "trainer.activation_checkpointing=true")
    for block in blocks:
        if not getattr(block, "_recomputed", False):
            block.forward = functools.partial(_recompute, block.forward)
            block._recomputed = True
    return len(blocks)


def _recompute(forward: Any, *args: Any, **kwargs: Any) -> Any:
    return checkpoint(forward, *args, use_reentrant=False, **kwargs)


#: the consumer methods (src/models/families/base.py) a task calls in place of ``forward`` and that
#: read the root's parameters (the chunked loss: ``hidden_states`` then ``chunked_loss``): FSDP2
#: gathers the root's shards for them as for ``forward``
ROOT_METHODS = ("hidden_states", "chunked_loss")


def grad_norm(parameters: Any) -> Any:
    """The total 2-norm of the parameters' gradients, whole, for parameters on several device
    meshes (under tensor parallelism FSDP2 puts the split matrices on the 2-D mesh and the rest on
    its data-parallel dimension; torch's ``get_total_norm`` cannot stack norms across meshes):
    each mesh's norm is reduced whole, then combined."""
    import torch

    groups: dict[Any, list[Any]] = {}
    for p in parameters:
        if p.grad is not None:
            groups.setdefault(getattr(p.grad, "device_mesh", None), []).append(p.grad)
    norms = []
    for grads in groups.values():
        norm = torch.nn.utils.get_total_norm(grads)
        norms.append(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
    return torch.linalg.vector_norm(torch.stack(norms)) if norms else torch.tensor(0.0)


def clip_grad_norm(parameters: Any, max_norm: float) -> Any:
    """``torch.nn.utils.clip_grad_norm_`` over ``grad_norm``'s total; returns the total norm."""
    parameters = list(parameters)
    total = grad_norm(parameters)
    coef = float(max_norm) / (float(total) + 1e-6)  # torch's own clip coefficient
    if coef < 1.0:
        for p in parameters:
            if p.grad is not None:
                p.grad.mul_(coef)
    return total


def _fsdp_placement(param: Any) -> Any:
    """FSDP2's shard dimension for ``param``: the last for a strided tensor-parallel split (rows
    from each of q, k and v: FSDP2's dim-0 sharding nested in it misplaced rows on a 2 x 2 mesh,
    tests/training/test_tensor_parallel.py), else FSDP2's default (0)."""
    from torch.distributed.tensor import Shard

    from src.models.components.tensor_parallel import is_strided

    return Shard(param.dim() - 1) if is_strided(param) else None


def check_tensor_parallel(model: nn.Module, tensor_parallel: int) -> None:
    """``trainer.tensor_parallel`` > 1: the model has a plan for it (a ``ConfigError`` naming the
    key and the fix otherwise), before any process starts."""
    if tensor_parallel > 1:
        model.tensor_parallel_plan(tensor_parallel)


def parallelize(
    model: nn.Module,
    mesh: Any,  # DeviceMesh with dims ("data_parallel", "tensor_parallel")
    *,
    mp_policy: Any = None,  # torch.distributed.fsdp.MixedPrecisionPolicy
    reshard_after_forward: bool = True,
) -> None:
    """FSDP2 in place: each declared block is one ``fully_shard`` unit (its parameters all-gathered just before its forward and
    freed after), then the root (embeddings, head, final norm: tied weights stay one parameter)."""
    from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method

    blocks = blocks_of(model, "trainer=fsdp2")
    tp_mesh = mesh["tensor_parallel"]
    if tp_mesh.size() > 1:  # tensor parallelism first, then FSDP2 over it (torchtitan's order)
        from torch.distributed.tensor.parallel import parallelize_module

        parallelize_module(model, tp_mesh, model.tensor_parallel_plan(tp_mesh.size()))
    dp_mesh = mesh["data_parallel"]
    kwargs = {} if mp_policy is None else {"mp_policy": mp_policy}
    # a strided tensor-parallel split (the fused qkv by heads) is sharded by FSDP2 along its
    # input dimension: FSDP2's own dim-0 sharding nested in a strided dim-0 split misplaces rows
    kwargs["shard_placement_fn"] = _fsdp_placement
    for block in blocks:
        fully_shard(block, mesh=dp_mesh, reshard_after_forward=reshard_after_forward, **kwargs)
    # the root's parameters are needed again by the head right after the last block
    fully_shard(model, mesh=dp_mesh, reshard_after_forward=False, **kwargs)
    for method in ROOT_METHODS:  # what a task calls on the model instead of forward
        register_fsdp_forward_method(model, method)


class ActivationCheckpointing(Callback):
    """``trainer.activation_checkpointing=true``: ``checkpoint_blocks`` on the task's model at
    setup, before ``configure_model`` and the strategy's wrapping (DDP, FSDP2)."""

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        checkpoint_blocks(pl_module.model)
