"""Device defaults: every GPU of the machine, in bf16 autocast; CPU as before.

``conf/trainer/default.yaml`` leaves the choice to Lightning's own device resolution
(``accelerator: auto``, ``devices: auto``, ``strategy: auto``): on a machine with N CUDA GPUs
that is N processes with DDP (Lightning picks ``ddp`` for more than one device), on one GPU a
single device, on a CPU one process. The precision follows the device through the
``${device_precision:${.accelerator}}`` resolver registered here: ``bf16-mixed`` when the run
will use CUDA GPUs that support bfloat16 (Ampere and later), ``32`` otherwise.

Recipes that fix the tokens per optimizer step (nanoGPT's ~0.5 M) whatever the number of devices use
``${grad_accum:<tokens>,${batch_size},${block_size},${.devices},${.num_nodes},${.accelerator}}``:
the gradient-accumulation steps that make ``batch_size × block_size × world size × steps`` equal
``tokens`` (an error when it does not divide)."""

from __future__ import annotations

from omegaconf import OmegaConf

GPU_ACCELERATORS = ("auto", "gpu", "cuda")


def device_precision(accelerator: str = "auto") -> str:
    """``bf16-mixed`` when ``accelerator`` resolves to CUDA GPUs with bfloat16, else ``32``."""
    import torch

    # NVML: CUDA not initialised
    if str(accelerator) not in GPU_ACCELERATORS or torch.cuda.device_count() == 0:
        return "32"
    return "bf16-mixed" if torch.cuda.is_bf16_supported() else "32"


def world_size(devices: object = "auto", num_nodes: int = 1, accelerator: str = "auto") -> int:
    """Processes Lightning will start: ``devices`` per node (``auto``/-1 = every GPU, or 1 on CPU) ×
    nodes."""
    import torch

    if not isinstance(devices, (str, int)) and hasattr(devices, "__len__"):  # a list of device ids
        per_node = len(devices)  # type: ignore[arg-type]
    elif str(devices) in ("auto", "-1"):
        gpus = torch.cuda.device_count() if str(accelerator) in GPU_ACCELERATORS else 0
        per_node = gpus or 1
    else:
        per_node = int(str(devices))
    return per_node * int(num_nodes)


def grad_accum(
    tokens: int,
    batch_size: int,
    block_size: int,
    devices: object = "auto",
    num_nodes: int = 1,
    accelerator: str = "auto",
) -> int:
    """Accumulation steps so that one optimizer step sees ``tokens`` tokens on this machine."""
    world = world_size(devices, num_nodes, accelerator)
    per_pass = int(batch_size) * int(block_size) * world
    steps, rest = divmod(int(tokens), per_pass)
    if rest or steps < 1:
        raise ValueError(
            f"{tokens} tokens per step is not a multiple of batch_size={batch_size} x "
            f"block_size={block_size} x {world} process(es) = {per_pass}; change batch_size, or "
            "set trainer.accumulate_grad_batches explicitly"
        )
    return steps


def register_resolvers() -> None:
    """``${device_precision:<accelerator>}`` and ``${grad_accum:...}`` (idempotent)."""
    if not OmegaConf.has_resolver("device_precision"):
        OmegaConf.register_new_resolver("device_precision", device_precision)
    if not OmegaConf.has_resolver("grad_accum"):
        OmegaConf.register_new_resolver("grad_accum", grad_accum)
