"""Strategy builders for configs that need Python objects (classes) as arguments.

``fsdp_strategy``: Lightning's FSDP1 (``trainer=fsdp``), kept for setups that already use it.
``FSDP2Strategy``: FSDP2 (``fully_shard``) on Lightning's 2-D device mesh (data-parallel x
tensor-parallel: the model's tensor-parallel plan, ``trainer.tensor_parallel``) through
Lightning's ``ModelParallelStrategy`` (``trainer=fsdp2``); what it does to the model is
``src.training.parallel``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.strategies import ModelParallelStrategy

from src.training.full_checkpoints import load_full, optimizer_state_by_ids
from src.training.parallel import clip_grad_norm, parallelize


def fsdp_strategy(
    sharding_strategy: str = "FULL_SHARD",
    activation_checkpointing: bool = False,
    state_dict_type: str = "full",
    **kwargs: Any,
):  # -> FSDPStrategy
    """FSDP with one unit per Transformer ``Block`` (embeddings and head stay in the root unit)."""
    from lightning.pytorch.strategies import FSDPStrategy

    from src.models.components.block import Block

    return FSDPStrategy(
        auto_wrap_policy={Block},
        activation_checkpointing_policy={Block} if activation_checkpointing else None,
        sharding_strategy=sharding_strategy,
        state_dict_type=state_dict_type,
        **kwargs,
    )


_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class FSDP2Strategy(ModelParallelStrategy):
    """FSDP2 over the data-parallel dimension, tensor parallelism over the other (torchtitan's
    2-D mesh: ``("data_parallel", "tensor_parallel")``, world size = DP × TP).

    tensor_parallel: TP degree (``trainer.tensor_parallel``; 1 = FSDP2 only); the data-parallel
    degree is the rest of the world size. param_dtype / reduce_dtype: FSDP2's
    ``MixedPrecisionPolicy`` (parameters cast for compute, gradients reduced in); ``auto`` =
    bfloat16 parameters on CUDA, float32 on CPU. state_dict_type: ``full`` = one ordinary
    ``.ckpt`` file gathered on rank 0; ``sharded`` = a directory written by every rank
    (torch.distributed.checkpoint), loadable at another world size.
    """

    def __init__(
        self,
        tensor_parallel: int = 1,
        param_dtype: str = "auto",
        reduce_dtype: str = "float32",
        state_dict_type: str = "full",
        reshard_after_forward: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            data_parallel_size="auto",
            tensor_parallel_size=int(tensor_parallel),
            save_distributed_checkpoint=state_dict_type == "sharded",
            **kwargs,
        )
        self.param_dtype, self.reduce_dtype = param_dtype, reduce_dtype
        self.reshard_after_forward = reshard_after_forward

    def setup_environment(self) -> None:
        # DP × TP = every process of every node (Lightning's "auto" would take DP = nodes)
        self._data_parallel_size = self.num_nodes * self.num_processes // self._tensor_parallel_size
        super().setup_environment()

    def mixed_precision(self):  # -> MixedPrecisionPolicy
        from torch.distributed.fsdp import MixedPrecisionPolicy

        param = self.param_dtype
        if param == "auto":
            param = "bfloat16" if self.root_device.type == "cuda" else "float32"
        return MixedPrecisionPolicy(
            param_dtype=_DTYPES[param], reduce_dtype=_DTYPES[self.reduce_dtype]
        )

    def setup(self, trainer: Any) -> None:
        """Shard the task's model (after ``configure_model``, before the optimizer is built)."""
        task = self.lightning_module
        if not getattr(task, "_parallelized", False):
            parallelize(
                task.model,
                self.device_mesh,
                mp_policy=self.mixed_precision(),
                reshard_after_forward=self.reshard_after_forward,
            )
            task._parallelized = True
        super().setup(trainer)
        if self._tensor_parallel_size > 1:  # the parameters sit on two meshes (clip_grad_norm)
            self.precision_plugin.clip_grad_by_norm = self._clip_grad_by_norm

    def optimizer_state(self, optimizer: Any) -> dict[str, Any]:
        """Full checkpoints: the gathered states with torch's ids, as one process writes them
        (``src/training/full_checkpoints.py``); sharded: Lightning's own."""
        if self._save_distributed_checkpoint:
            return super().optimizer_state(optimizer)
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_optimizer_state_dict,
        )

        optimizer = getattr(optimizer, "_optimizer", optimizer)  # a LightningOptimizer's own
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        named = get_optimizer_state_dict(self.model, optimizer, options=options)
        return optimizer_state_by_ids(named if self.global_rank == 0 else {})

    def load_checkpoint(self, checkpoint_path: Any, weights_only: bool | None = None) -> Any:
        path = Path(self.broadcast(checkpoint_path))
        if not path.is_file():  # a sharded directory: torch.distributed.checkpoint reshards it
            return super().load_checkpoint(path, weights_only)
        checkpoint = self.checkpoint_io.load_checkpoint(path)  # SafeCheckpointIO: weights-only
        return load_full(
            checkpoint, self.model, self.optimizers, self.lightning_module.strict_loading
        )

    def _clip_grad_by_norm(self, optimizer: Any, clip_val: float) -> None:
        clip_grad_norm(self.precision_plugin.main_params(optimizer), clip_val)
