"""The ``trainer`` node checked against Lightning and the machine, before anything is built.

Part of ``validate_run_config`` (src/config/validate.py), kept apart so that each file stays one
concept: ``Hardware`` (what the machine offers, injectable so tests can pretend to have GPUs) and
``check_trainer`` (argument names against ``lightning.pytorch.Trainer``; accelerator, strategy,
devices and precision against the hardware; step, epoch, interval, limit and clipping values).
Every failure is a ``ConfigError`` naming the key, the value and the fix.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from src.errors import ConfigError, check_keys
from src.lightning_compat import precision_inputs


@dataclass(frozen=True)
class Hardware:
    """What the machine offers (injectable, so tests can pretend to have GPUs)."""

    cuda_available: bool
    cuda_count: int
    bf16_supported: bool
    device_name: str = "cpu"
    cpu_cores: int | None = None  # usable by this process (None: unknown, not checked)

    @classmethod
    def detect(cls) -> Hardware:
        import torch

        ok = torch.cuda.is_available()
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cores = os.cpu_count() or None
        return cls(
            cuda_available=ok,
            cuda_count=torch.cuda.device_count() if ok else 0,
            bf16_supported=bool(ok and torch.cuda.is_bf16_supported()),
            device_name=torch.cuda.get_device_name(0) if ok else "cpu",
            cpu_cores=cores,
        )


#: ``trainer.*`` keys of this project that are not ``lightning.pytorch.Trainer`` arguments:
#: ``src.training.setup.build_trainer`` takes them out of the node before instantiating it
RUN_TRAINER_KEYS = ("activation_checkpointing", "tensor_parallel", "device_memory_gb")


def lightning_trainer_node(node: Mapping[str, Any]) -> dict[str, Any]:
    """The ``trainer`` node without ``RUN_TRAINER_KEYS``: what ``lightning.pytorch.Trainer``
    takes."""
    return {k: v for k, v in node.items() if k not in RUN_TRAINER_KEYS}


def fail(key: str, value: Any, fix: str) -> NoReturn:
    """``key=value`` cannot work: ``fix`` says what does (the checks here and in validate.py)."""
    raise ConfigError(f"{key}={value!r} is invalid: {fix}")


def positive_int(key: str, value: Any, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        fail(key, value, fix)
    return value


_FP16 = ("16", "16-mixed", "16-true", 16)
_BF16 = ("bf16", "bf16-mixed", "bf16-true")


def _strategy_name(strategy: Any) -> str:
    if isinstance(strategy, Mapping):
        return str(strategy.get("_target_", "custom"))
    return str(strategy)


def _requested_gpus(devices: Any, available: int) -> int:
    if devices in ("auto", -1, "-1", None):
        return max(available, 1)
    if isinstance(devices, (list, tuple)):
        return len(devices)
    if isinstance(devices, str):
        parts = [p for p in devices.split(",") if p.strip()]
        return len(parts) if len(parts) > 1 or devices.endswith(",") else int(parts[0])
    return int(devices)


def check_trainer(plain: Mapping[str, Any], hw: Hardware) -> None:
    t = dict(plain.get("trainer") or {})
    target = t.get("_target_", "lightning.pytorch.Trainer")
    if target in ("lightning.pytorch.Trainer", "lightning.Trainer", "pytorch_lightning.Trainer"):
        import lightning.pytorch as pl

        params = inspect.signature(pl.Trainer.__init__).parameters
        given = {k: v for k, v in t.items() if k != "_target_"}
        accepted = [p for p in params if p != "self"] + list(RUN_TRAINER_KEYS)
        check_keys(given, accepted, where="lightning.pytorch.Trainer", prefix="trainer.")
    accel = str(t.get("accelerator", "auto"))
    strategy = _strategy_name(t.get("strategy", "auto"))
    precision = t.get("precision", 32)
    on_gpu = accel in ("gpu", "cuda") or (accel == "auto" and hw.cuda_available)
    if accel in ("gpu", "cuda") and not hw.cuda_available:
        raise ConfigError(
            f"trainer.accelerator={accel} but no CUDA GPU is visible (torch.cuda.is_available() is "
            "False); use trainer=cpu (or trainer.accelerator=cpu), or run on a GPU machine"
        )
    fsdp2 = strategy.endswith("FSDP2Strategy")  # trainer=fsdp2 runs on CPU processes too (gloo)
    if "fsdp" in strategy.lower() and not on_gpu and not fsdp2:
        why = f"trainer.accelerator={accel}" + (
            "" if accel == "cpu" else " and no CUDA GPU is visible"
        )
        raise ConfigError(
            f"trainer.strategy={strategy} (FSDP) needs CUDA GPUs, but {why}; on CPU use "
            "trainer=ddp_cpu (DDP) or trainer=cpu"
        )
    devices = t.get("devices", "auto")
    if on_gpu:
        try:
            requested = _requested_gpus(devices, hw.cuda_count)
        except (TypeError, ValueError):
            raise ConfigError(
                f"trainer.devices={devices!r} is invalid: a number of devices, a list of GPU "
                "indices, -1 or auto"
            ) from None
        if requested > hw.cuda_count:
            raise ConfigError(
                f"trainer.devices={devices} asks for {requested} GPU(s) but only {hw.cuda_count} "
                f"are visible; use trainer.devices={hw.cuda_count} or trainer.devices=auto"
            )
    if devices in (0, "0") and not isinstance(devices, bool):
        fail(
            "trainer.devices",
            devices,
            "at least 1 (a number of devices), a list of GPU indices, -1 or auto",
        )
    if not on_gpu:
        _check_cpu_devices(devices)
        _warn_cpu_oversubscribed(devices, hw)
    elif isinstance(devices, int) and not isinstance(devices, bool) and devices < -1:
        fail(
            "trainer.devices",
            devices,
            "a number of GPUs, 1 or more, a list of GPU indices, -1 (all) or auto",
        )
    accepted = precision_inputs()
    if str(precision) not in accepted:
        fail("trainer.precision", precision, f"use one of {', '.join(accepted)}")
    if not on_gpu and precision in _FP16:
        raise ConfigError(
            f"trainer.precision={precision} (float16) runs on GPUs only and Lightning would "
            "silently switch to bf16-mixed on CPU; use trainer.precision=32 or "
            "trainer.precision=bf16-mixed"
        )
    if on_gpu and precision in _BF16 and not hw.bf16_supported:
        raise ConfigError(
            f"trainer.precision={precision} needs bfloat16, which this GPU ({hw.device_name}) does "
            "not support (torch.cuda.is_bf16_supported() is False); use "
            "trainer.precision=16-mixed or trainer.precision=32"
        )
    checked_max_steps(t)
    _check_parallel(t, fsdp2, strategy)
    acc = t.get("accumulate_grad_batches", 1)
    positive_int(
        "trainer.accumulate_grad_batches", acc, "a positive number of batches per optimizer step"
    )
    positive_int("trainer.num_nodes", t.get("num_nodes", 1), "a positive number of machines")
    positive_int(
        "trainer.log_every_n_steps",
        t.get("log_every_n_steps", 50),
        "log every this many steps, 1 or more",
    )
    epochs = t.get("max_epochs")
    if epochs is not None and (
        isinstance(epochs, bool) or not isinstance(epochs, int) or epochs == 0 or epochs < -1
    ):
        # 0 would end fit() before its first step, with status 0
        fail(
            "trainer.max_epochs",
            epochs,
            "a number of epochs, 1 or more, -1 (no limit: max_steps decides) or null",
        )
    interval = t.get("val_check_interval")
    if interval is not None and not _fraction_or_count(interval, zero=False):
        fail(
            "trainer.val_check_interval",
            interval,
            "a number of steps (1 or more) or a fraction of an epoch in (0, 1]",
        )
    for key in ("limit_train_batches", "limit_val_batches", "limit_test_batches"):
        if t.get(key) is not None and not _fraction_or_count(t[key], zero=True):
            fail(
                f"trainer.{key}",
                t[key],
                "a number of batches (0 skips the loop) or a fraction in [0, 1]",
            )
    clip = t.get("gradient_clip_val")
    if clip is not None and (
        isinstance(clip, bool) or not isinstance(clip, (int, float)) or not 0 <= clip < float("inf")
    ):
        fail(
            "trainer.gradient_clip_val",
            clip,
            "a gradient norm (or value) limit, 0 or more, or null (no clipping)",
        )


def checked_max_steps(t: Mapping[str, Any]) -> Any:
    """``trainer.max_steps``, checked (the schedule's default horizon: checked before it is
    read)."""
    v = t.get("max_steps")
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or (v < 1 and v != -1)):
        fail("trainer.max_steps", v, "a positive number of optimizer steps, or -1 (use max_epochs)")
    return v


def _check_cpu_devices(devices: Any) -> None:
    """On CPU, Lightning takes a number of processes only (-1 and lists raise a bare TypeError
    there)."""
    if devices in ("auto", None) or (
        isinstance(devices, int) and not isinstance(devices, bool) and devices >= 1
    ):
        return
    if isinstance(devices, str) and devices.strip().isdigit() and int(devices) >= 1:
        return
    fail(
        "trainer.devices",
        devices,
        "on CPU a number of processes, 1 or more, or auto (GPU indices and -1 "
        "are for trainer.accelerator=gpu)",
    )


def _fraction_or_count(value: Any, *, zero: bool) -> bool:
    """Lightning's convention: an int counts batches/steps, a float is a fraction of an epoch."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= (0 if zero else 1)
    return isinstance(value, float) and (0.0 <= value if zero else 0.0 < value) and value <= 1.0


def _cpu_processes(devices: Any) -> int | None:
    if devices in ("auto", None):
        return 1
    if isinstance(devices, (list, tuple)):
        return len(devices)
    try:
        return int(devices)
    except (TypeError, ValueError):
        return None


def _warn_cpu_oversubscribed(devices: Any, hw: Hardware) -> None:
    """More CPU processes than usable cores: allowed (it still computes the same), with a warning
    that states the cost (docs/reliability.md)."""
    n = _cpu_processes(devices)
    if hw.cpu_cores is None or n is None or n <= hw.cpu_cores:
        return
    from lightning.pytorch.utilities.rank_zero import rank_zero_warn

    cores = hw.cpu_cores
    rank_zero_warn(
        f"trainer.devices={devices} starts {n} training processes on {cores} usable CPU cores: "
        f"each gets {cores / n:.2g} of a core and every step waits for the slowest, so expect each "
        f"step to take more than {n / cores:.2g}x as long as with trainer.devices={cores} "
        "(docs/reliability.md: 4 processes on 2 cores ran 6.6x slower); use "
        f"trainer.devices={cores} or fewer (trainer=cpu for one process)"
    )


def _check_parallel(t: Mapping[str, Any], fsdp2: bool, strategy: str) -> None:
    """``trainer.activation_checkpointing``, ``trainer.tensor_parallel`` and
    ``trainer.device_memory_gb`` (src/training/parallel.py, src/inspection/memory.py)."""
    ac = t.get("activation_checkpointing", False)
    if not isinstance(ac, bool):
        fail("trainer.activation_checkpointing", ac, "true or false")
    if ac and "fsdp_strategy" in strategy:
        fail(
            "trainer.activation_checkpointing",
            ac,
            "trainer=fsdp (FSDP1) checkpoints through its own "
            "trainer.strategy.activation_checkpointing=true; or use trainer=fsdp2",
        )
    tp = positive_int(
        "trainer.tensor_parallel",
        t.get("tensor_parallel", 1),
        "a number of processes that split each layer, 1 or more (1 = no tensor parallelism)",
    )
    if tp > 1 and not fsdp2:
        fail("trainer.tensor_parallel", tp, "tensor parallelism runs under trainer=fsdp2")
    strategy_node = t.get("strategy") if isinstance(t.get("strategy"), Mapping) else {}
    if tp > 1 and strategy_node.get("state_dict_type") == "sharded":
        fail(
            "trainer.tensor_parallel",
            tp,
            "trainer.strategy.state_dict_type=sharded cannot record the fused qkv split by heads "
            "(torch.distributed.checkpoint writes contiguous chunks only); use "
            "trainer.strategy.state_dict_type=full with tensor parallelism",
        )
    devices, nodes = t.get("devices", "auto"), t.get("num_nodes", 1)
    if tp > 1 and isinstance(devices, int) and not isinstance(devices, bool) and devices > 0:
        world = devices * nodes
        if world % tp:
            fail(
                "trainer.tensor_parallel",
                tp,
                f"the world size trainer.devices x trainer.num_nodes = {devices} x {nodes} = "
                f"{world} must be a multiple of it; set trainer.devices to a multiple of {tp}",
            )
    memory = t.get("device_memory_gb")
    if memory is not None and (
        isinstance(memory, bool) or not isinstance(memory, (int, float)) or memory <= 0
    ):
        fail("trainer.device_memory_gb", memory, "the memory of one device in GB, or null")
