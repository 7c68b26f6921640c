"""Every size of a run has a bound, checked with the run config before anything is built.

Part of ``validate_run_config`` (src/config/validate.py, through ``check_task_and_data``). A size
is refused when the memory it needs at the least exceeds the machine's: the bound is arithmetic
on the config, never a fixed number, and each estimate is a lower bound (2-byte floats, the
narrowest the trainer computes in; a sequence at least as long as its size key), so a refused
value cannot fit however the run is set up. The message names the key, the bytes it would take,
the memory there is, and the fix. Legend: B batch, T tokens per sequence, C ``model.d_model``,
F ``model.d_ff``, L layers, H heads, V ``model.vocab_size`` (when it is the model's, not yet the
tokenizer's: ``vocab_size_from=model``)::

    training batch    B·T · 2·L·(C + F)   each layer's input and FFN hidden, kept for backward
    evaluation batch  B·T · 2·max(C, F)   the widest activation of a forward (also a synthetic
                                          test's, whose exact match reads the forward)
    held examples     N · (object + n)    a synthetic split's examples, all generated at setup
    probe batch       B · 2·(L·H·T² + T·C) the attention probabilities the probes read

Plus B·T·2·V for the logits when V is known. Memory is the larger of the host's RAM
(``SC_PHYS_PAGES``) and GPU 0's; tests pass their own.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from src.errors import ConfigError, DataError
from src.models.config import ModelConfig

FLOAT_BYTES = 2  # bf16/fp16: the narrowest float an activation is kept in
#: torch, numpy and Lightning's ``seed_everything`` take a seed in [0, 2**32 - 1]
MAX_SEED = 2**32 - 1
PROBES_TARGET = "src.callbacks.probes.Probes"


@dataclass(frozen=True)
class Memory:
    """How many bytes the run may use, and where they are (for the message)."""

    bytes: int
    where: str

    @classmethod
    def detect(cls) -> Memory:
        host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        import torch

        if torch.cuda.is_available():
            gpu = torch.cuda.get_device_properties(0).total_memory
            if gpu > host:
                return cls(gpu, f"GPU 0 ({torch.cuda.get_device_name(0)})")
        return cls(host, "host RAM")

    def check(
        self, key: str, value: Any, need: int, what: str, fix: str, error: type = ConfigError
    ) -> None:
        """``error`` naming ``key`` when ``need`` bytes exceed this memory."""
        if need > self.bytes:
            raise error(
                f"{key}={value!r} is too large: {what} would take at least {gib(need)}, more than "
                f"the {gib(self.bytes)} of {self.where} here; {fix}"
            )


def gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB"


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def count(key: str, value: Any, fix: str, error: type = ConfigError, low: int = 1) -> int:
    """``value`` as an integer >= ``low``, else ``error`` naming the key."""
    if not is_int(value) or value < low:
        raise error(f"{key}={value!r} is invalid: {fix}")
    return value


def seed(key: str, value: Any, error: type = ConfigError) -> int:
    """A seed in [0, 2**32 - 1], else ``error`` naming the key."""
    if not is_int(value) or not 0 <= value <= MAX_SEED:
        raise error(
            f"{key}={value!r} is invalid: an integer seed, 0 or more and at most {MAX_SEED} "
            "(2**32 - 1, the range numpy and Lightning seed from)"
        )
    return value


# ---------------------------------------------------------------- bytes per token (lower bounds)


def layers(model: ModelConfig) -> int:
    if model.family == "encoder_decoder":
        return min(model.encoder_layers, model.decoder_layers)
    return model.n_layer


def train_token_bytes(model: ModelConfig, vocab: int | None) -> int:
    return FLOAT_BYTES * (layers(model) * (model.d_model + model.d_ff) + (vocab or 0))


def eval_token_bytes(model: ModelConfig, vocab: int | None) -> int:
    return FLOAT_BYTES * (max(model.d_model, model.d_ff) + (vocab or 0))


def probe_bytes(model: ModelConfig, batch: int, length: int) -> int:
    """Bytes of a probe batch: every layer's attention probabilities [B, H, T, T] and one hidden
    state [B, T, C]."""
    per_seq = layers(model) * model.n_head * length * length + length * model.d_model
    return batch * FLOAT_BYTES * per_seq


def example_overhead() -> int:
    """Bytes of an empty synthetic example held in memory: the object, its attributes, two
    strings."""
    from src.data.synthetic.base import Example

    ex = Example("", "")
    return sys.getsizeof(ex) + sys.getsizeof(vars(ex)) + 2 * sys.getsizeof("")


# ---------------------------------------------------------------- the checks


def check_batches(
    plain: Mapping[str, Any],
    model: ModelConfig,
    loader: Mapping[str, Any],
    length: int,
    memory: Memory,
) -> None:
    """``batch_size``, ``data.val_batch_size`` and ``data.epoch_batches``: their ranges, and one
    training / evaluation batch of ``length`` tokens against memory."""
    vocab = model.vocab_size if plain.get("vocab_size_from", "tokenizer") == "model" else None
    batch = plain["batch_size"]  # a positive int: check_task_and_data
    memory.check(
        "batch_size",
        batch,
        batch * length * train_token_bytes(model, vocab),
        f"a training batch of {batch} x {length} tokens through {layers(model)} layers "
        f"(d_model={model.d_model}, d_ff={model.d_ff})",
        "lower batch_size (and raise trainer.accumulate_grad_batches for the same update)",
    )
    for key, fix in (
        ("epoch_batches", "a positive number of training batches per epoch, or null (endless)"),
        ("val_batch_size", "a positive number of sequences, or null (= batch_size)"),
    ):
        if loader.get(key) is not None:
            count(f"data.{key}", loader[key], fix, DataError)
    val = loader.get("val_batch_size")
    if val is not None:
        memory.check(
            "data.val_batch_size",
            val,
            val * length * eval_token_bytes(model, vocab),
            f"an evaluation batch of {val} x {length} tokens (d_model={model.d_model}, "
            f"d_ff={model.d_ff})",
            "lower data.val_batch_size, or set it to null (= batch_size)",
            DataError,
        )


def check_synthetic(
    source_cls: Any,
    args: Mapping[str, Any],
    model: ModelConfig,
    batch: int,
    val_batch: int,
    memory: Memory,
) -> None:
    """A synthetic task's sizes against memory, before ``check_run`` generates an example: the
    validation and test examples that setup holds, a training batch's tokens, and the test's
    forward at the longest test length. A sequence at size n has at least n tokens. Values that are not
    integers are left to ``check_run``, which names them."""
    key = source_cls.length_key
    name = source_cls.registry_name
    param = inspect.signature(source_cls).parameters.get(key)
    n = args.get(key, param.default if param is not None else None)
    val_n, test_n = args.get("val_examples", 256), args.get("test_examples", 256)
    lengths = args.get("test_lengths")
    if not (is_int(n) and n > 0 and is_int(val_n) and is_int(test_n)):
        return
    if lengths is None:
        lengths = [n, 2 * n, 4 * n]
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence):
        return
    lengths = [t for t in lengths if is_int(t)]
    over = example_overhead()
    memory.check(
        f"data.{key}",
        n,
        batch * n * 8 * 2,
        f"a training batch of {batch} examples of at least {n} tokens (int64 ids and mask)",
        f"lower data.{key}",
        DataError,
    )
    memory.check(
        "data.val_examples",
        val_n,
        val_n * (over + n),
        f"{val_n} validation examples of data={name} at data.{key}={n}, held at setup "
        f"({over} bytes each + a character per token)",
        f"lower data.val_examples (or data.{key})",
        DataError,
    )
    held = sum(test_n * (over + t) for t in set(lengths) | {n})
    memory.check(
        "data.test_examples" if args.get("test_lengths") is None else "data.test_lengths",
        test_n if args.get("test_lengths") is None else list(args["test_lengths"]),
        held,
        f"{test_n} test examples of data={name} at each data.{key} of "
        f"{sorted(set(lengths) | {n})}, held at setup",
        "lower data.test_examples or the longest data.test_lengths",
        DataError,
    )
    if lengths:
        longest = max(lengths)
        memory.check(
            "data.test_lengths",
            list(args.get("test_lengths") or lengths),
            val_batch * longest * eval_token_bytes(model, None),
            f"the test at data.{key}={longest}: a forward over {val_batch} sequences of at "
            f"least {longest} tokens (its widest activation)",
            "lower the longest data.test_lengths or data.val_batch_size",
            DataError,
        )


def check_probes(plain: Mapping[str, Any], model: ModelConfig, memory: Memory) -> None:
    """``callbacks.probes.batch_size``: a positive integer, and the probe batch's attention
    probabilities against memory, before the callback is built (its other keys: its
    constructor)."""
    node = (plain.get("callbacks") or {}).get("probes")
    if not isinstance(node, Mapping) or node.get("_target_") != PROBES_TARGET:
        return
    where = "callbacks.probes"
    batch = count(
        f"{where}.batch_size", node.get("batch_size", 16), "a positive number of sequences, e.g. 16"
    )
    length = node.get("length")
    if length is None:  # the default: the longest up to 64 the vocabulary and positions allow
        rows = model.max_seq_len if model.position.get("name") == "learned" else 64
        vocab = model.vocab_size if plain.get("vocab_size_from", "tokenizer") == "model" else 2
        length = min(64, rows, 2 * vocab)
    elif not is_int(length):
        return  # the callback names it
    check_probe_memory(f"{where}.batch_size", batch, model, length, memory)


def check_probe_memory(
    key: str, batch: int, model: ModelConfig, length: int, memory: Memory
) -> None:
    memory.check(
        key,
        batch,
        probe_bytes(model, batch, length),
        f"a probe batch of {batch} x {length} tokens (the attention probabilities of "
        f"{layers(model)} layers x {model.n_head} heads)",
        f"lower {key} (16 sequences is the default) or the probe length",
    )
