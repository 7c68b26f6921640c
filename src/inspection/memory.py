"""Memory per device before launch: parameters, gradients, optimizer states and activations of a
training step, for the run's strategy, precision and activation checkpointing.

Nothing is allocated: the model is built on the meta device, the optimizer takes one step there
(its states are what it allocates: AdamW two per parameter, SGD with momentum one, …), and the
activations are the tensors autograd saves for the backward pass of one forward over
``batch_size × block_size`` tokens (counted as they are saved, ``saved_tensors_hooks``). With
``trainer.activation_checkpointing`` the blocks keep only their inputs, and one block's activations
live again while it is recomputed. Sharded strategies (``fsdp``, ``fsdp2``) divide parameters,
gradients and optimizer states by the world size (ZeRO-3: Rajbhandari et al. 2020); DDP keeps a
whole copy on every device. With ``trainer.tensor_parallel`` = tp, the matrices the model's plan
splits are divided by the world size and the rest by the data-parallel size (world / tp); the
activations are counted whole (an upper bound: the attention's and FFN's inner tensors are split
too). Not counted: the CUDA context and allocator slack, communication
buckets, FSDP's gathered copy of one block, the logits' transient gradient.

    python -m src.inspect memory trainer=fsdp2 trainer.devices=8 model=gpt2_xl
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from unittest import mock

import torch
from torch.nn import functional as F

from src.config.spec import RunSpec
from src.errors import ConfigError
from src.models import build_model

GiB = 1024**3


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per device of one training step."""

    parameters: int
    gradients: int
    optimizer: int
    activations: int
    world_size: int  # processes the parameters, gradients and optimizer states are sharded over

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer + self.activations

    def terms(self) -> dict[str, int]:
        return {
            "parameters": self.parameters,
            "gradients": self.gradients,
            "optimizer": self.optimizer,
            "activations": self.activations,
        }

    def largest(self) -> tuple[str, int]:
        return max(self.terms().items(), key=lambda kv: kv[1])


def world_size(trainer: Mapping[str, Any]) -> int:
    """Processes of the run (``devices × num_nodes``); ``auto`` counts as one device."""
    devices = trainer.get("devices", "auto")
    n = devices if isinstance(devices, int) and not isinstance(devices, bool) and devices > 0 else 1
    return n * int(trainer.get("num_nodes", 1))


def sharded(trainer: Mapping[str, Any]) -> bool:
    strategy = trainer.get("strategy", "auto")
    name = str(strategy.get("_target_", "")) if isinstance(strategy, Mapping) else str(strategy)
    return "fsdp" in name.lower()


def _param_bytes(precision: Any) -> int:
    return 2 if str(precision) in ("bf16-true", "16-true", "bf16", "16") else 4


def estimate(spec: RunSpec) -> MemoryEstimate:
    """The run's memory per device (see the module docstring)."""
    trainer = spec.plain.get("trainer") or {}
    world = world_size(trainer) if sharded(trainer) else 1
    width = _param_bytes(trainer.get("precision", 32))
    with torch.device("meta"):  # shapes and dtypes only: nothing is allocated
        model = build_model(spec.model)
    if width == 2:
        model = model.to(torch.bfloat16)
    n_params = sum(p.numel() for p in model.parameters())
    # per device: FSDP2 shards everything over the data-parallel ranks (world / tp), and tensor
    # parallelism splits the plan's matrices over the tp ranks of each
    tp = int(trainer.get("tensor_parallel", 1)) if world > 1 else 1
    split = _split_numel(model, tp)
    share = ((n_params - split) * tp + split) / (world * n_params)  # of every parameter's bytes
    optimizer_bytes = _optimizer_bytes(spec, model)
    activations = _activation_bytes(
        model,
        spec.data.batch_size,
        spec.data.block_size,
        bool(trainer.get("activation_checkpointing")),
    )
    return MemoryEstimate(
        parameters=int(n_params * width * share),
        gradients=int(n_params * width * share),
        optimizer=int(optimizer_bytes * share),
        activations=activations,
        world_size=world,
    )


def _split_numel(model: Any, tp: int) -> int:
    """Elements of the parameters ``trainer.tensor_parallel`` splits (the family's plan: q/k/v
    and FFN-in column-wise with FFN-in's bias, the output matrices row-wise; the fused qkv's and
    the row-wise biases stay whole); 0 without tensor parallelism. A model without a plan is
    refused in one line."""
    if tp == 1:
        return 0
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    total = 0
    for path, style in model.tensor_parallel_plan(tp).items():
        if isinstance(style, (ColwiseParallel, RowwiseParallel)):
            linear = model.get_submodule(path)
            total += linear.weight.numel()
            if type(style) is ColwiseParallel and linear.bias is not None:  # fused: bias whole
                total += linear.bias.numel()
    return total


def _optimizer_bytes(spec: RunSpec, model: torch.nn.Module) -> int:
    """The states the run's optimizer allocates in its first step."""
    optimizer = spec.optimizer.build(model, torch.device("meta"))
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    total = sum(
        v.numel() * v.element_size()
        for state in optimizer.state.values()
        for v in state.values()
        if torch.is_tensor(v) and v.dim() > 0  # a step counter is a scalar
    )
    for p in model.parameters():
        p.grad = None
    return total


def _activation_bytes(model: Any, batch: int, seq_len: int, checkpointed: bool) -> int:
    """Bytes autograd keeps from one forward of ``batch`` windows of ``seq_len`` tokens: inside
    the blocks and outside them (embeddings, final norm, head and loss). Checkpointed blocks keep
    their inputs [B, T, C] only, and one block's activations live again while it is
    recomputed."""
    ids = torch.zeros(batch, seq_len, dtype=torch.long, device="meta")
    seen: set[int] = set()
    saved = {"in_blocks": 0, "outside": 0}
    depth = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        base = t._base if t._base is not None else t
        if id(base) not in seen and not isinstance(base, torch.nn.Parameter):
            seen.add(id(base))
            saved["in_blocks" if depth[0] else "outside"] += base.numel() * base.element_size()
        return t

    blocks = model.parallel_blocks()
    hooks = [b.register_forward_pre_hook(lambda *_: depth.__setitem__(0, 1)) for b in blocks]
    hooks += [b.register_forward_hook(lambda *_: depth.__setitem__(0, 0)) for b in blocks]
    try:
        with (
            torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
            mock.patch.object(F, "scaled_dot_product_attention", _fused_attention),
        ):
            model(input_ids=ids, labels=ids)
    finally:
        for h in hooks:
            h.remove()
    if not checkpointed or not blocks:
        return saved["in_blocks"] + saved["outside"]
    width = next(model.parameters()).element_size()
    block_input = batch * seq_len * model.config.d_model * width
    return saved["outside"] + len(blocks) * block_input + saved["in_blocks"] // len(blocks)


def _fused_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """SDPA as a GPU or CPU run computes it: the fused kernel, which keeps q, k, v, the output
    and the log-sum-exp for the backward pass. On the meta device SDPA would take its math path
    and keep the [B, H, T, S] probabilities, which no fused run holds."""
    if enable_gqa and k.shape[1] != q.shape[1]:  # [B, K, S, D] -> [B, H, S, D]
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, dropout_p, is_causal, attn_mask=attn_mask, scale=scale
    )[0]


def check_fits(spec: RunSpec) -> MemoryEstimate | None:
    """``trainer.device_memory_gb``: refuse, before any process starts, a run whose estimate does
    not fit, naming its largest term."""
    limit = (spec.plain.get("trainer") or {}).get("device_memory_gb")
    if limit is None:
        return None
    est = estimate(spec)
    if est.total > limit * GiB:
        name, size = est.largest()
        raise ConfigError(
            f"trainer.device_memory_gb={limit} is less than this run needs per device: "
            f"{est.total / GiB:.2f} GiB, of which {name} {size / GiB:.2f} GiB is the largest; "
            "shard it (trainer=fsdp2 with more trainer.devices), set "
            "trainer.activation_checkpointing=true, or lower batch_size"
        )
    return est


def run(cfg: Any) -> None:
    """``python -m src.inspect memory``: the estimate of the composed run config, one line a term."""
    from src.config.validate import validate_run_config

    spec = validate_run_config(cfg)
    est = estimate(spec)
    trainer = spec.plain.get("trainer") or {}
    strategy = trainer.get("strategy", "auto")
    name = strategy.get("_target_", "") if isinstance(strategy, Mapping) else strategy
    print(
        f"{spec.model.name}: batch_size {spec.data.batch_size} x block_size {spec.data.block_size} "
        f"per device; strategy {name} over {est.world_size} process(es), tensor_parallel "
        f"{trainer.get('tensor_parallel', 1)}; precision "
        f"{trainer.get('precision')}; activation_checkpointing "
        f"{bool(trainer.get('activation_checkpointing'))}"
    )
    for term, size in est.terms().items():
        print(f"  {term:<12} {size / GiB:9.3f} GiB per device")
    print(f"  {'total':<12} {est.total / GiB:9.3f} GiB per device")
    limit = trainer.get("device_memory_gb")
    if limit is not None:
        verdict = "fits" if est.total <= limit * GiB else "does not fit"
        print(f"  trainer.device_memory_gb={limit}: {verdict}")
