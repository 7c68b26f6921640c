"""Tensor parallelism's layouts for this project's modules (Shoeybi et al. 2019, Megatron-LM, §3:
column-parallel first matrix, row-parallel second, one all-reduce per sublayer in each pass).

PyTorch's ``ColwiseParallel`` / ``RowwiseParallel`` shard ordinary ``nn.Linear`` layers.
``FusedColwiseParallel`` shards a fused projection whose rows are ``parts`` equal blocks (the
self-attention's ``qkv``: [q | k | v], each H·D rows) so that every rank holds the same heads of
every block: rank r's rows are q's, k's and v's heads r·H/tp … (r+1)·H/tp − 1, concatenated
(DTensor's strided sharding, ``_StridedShard``); its bias stays whole on every rank. The
parameter's global layout, and so the state dict and every checkpoint, stays the unsharded
model's.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from torch import nn
from torch.distributed.tensor import Replicate, distribute_module, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel
from torch.distributed.tensor.placement_types import _StridedShard

__all__ = [
    "ColwiseParallel",
    "FusedColwiseParallel",
    "LocalHeads",
    "RowwiseParallel",
    "is_strided",
]


def is_strided(tensor: Any) -> bool:
    """A DTensor with a strided split (``FusedColwiseParallel``'s weight and its optimizer
    states): its rows are not one contiguous block of the whole tensor."""
    return any(isinstance(p, _StridedShard) for p in getattr(tensor, "placements", ()))


class FusedColwiseParallel(ColwiseParallel):
    """``ColwiseParallel`` for an ``nn.Linear`` whose output rows are ``parts`` equal blocks:
    each block is split over the ranks, and a rank's output is its share of every block
    ([..., parts · rows / tp], block after block)."""

    def __init__(self, parts: int) -> None:
        super().__init__()
        self.parts = parts

    def _partition_linear_fn(self, name: str, module: nn.Module, device_mesh: Any) -> None:
        # the weight split; the bias stays whole on every rank (each rank adds its own rows of
        # it: DTensor slices it locally in the forward and gathers its gradient), so FSDP2 can
        # shard it over the data-parallel ranks as any whole parameter
        placements = {"weight": [_StridedShard(0, split_factor=self.parts)], "bias": [Replicate()]}
        for pname, param in module.named_parameters():
            dist = distribute_tensor(param, device_mesh, placements[pname], src_data_rank=0)
            module.register_parameter(pname, nn.Parameter(dist, param.requires_grad))

    @staticmethod
    def _local_output(mod: nn.Module, outputs: Any, device_mesh: Any) -> Any:
        # the output is already each rank's share of every block: no redistribution
        return outputs.to_local()

    def _apply(self, module: nn.Module, device_mesh: Any) -> nn.Module:
        if not isinstance(module, nn.Linear):
            raise NotImplementedError("FusedColwiseParallel shards an nn.Linear")
        return distribute_module(
            module,
            device_mesh,
            self._partition_linear_fn,
            partial(self._prepare_input_fn, self.input_layouts, self.desired_input_layouts),
            self._local_output,
        )


class LocalHeads(ParallelStyle):
    """Applied to an attention module: its head counts become this rank's share, H / tp
    (torchtitan's ``n_heads // tp``), so it splits, attends and merges only its own heads."""

    def _apply(self, module: nn.Module, device_mesh: Any) -> nn.Module:
        module.shard_heads(device_mesh.size())
        return module
