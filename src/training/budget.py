"""The training budget of a run: its parameters and the training FLOPs of one optimizer step on
its nominal batch, counted by the model itself (``TransformerModel.training_flops``, the one FLOPs
formula) for the shape the task gives it, so a decoder reading "source <sep> target" and an
encoder-decoder reading the two apart are each counted as they run. Every run writes it to
``<run dir>/budget.json`` (``write_budget``, from ``build_run``).

A study's protocol matches its variants by ``params`` (``src.models.matching``), ``flops`` or
``tokens``: ``solve_steps`` gives each variant the optimizer steps at which its training FLOPs (or
tokens) equal the reference variant's, and ``python -m src.study`` passes them as
``trainer.max_steps``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from src.errors import ConfigError
from src.jsonfile import write_json
from src.studies.protocol import Protocol

BUDGET_FILE = "budget.json"
MATCH_MODES = ("params", "flops", "tokens")


@dataclass
class Budget:
    """What a run's optimizer steps cost, by the model's own FLOPs count
    (``TransformerModel.training_flops``: forward + backward) on the run's nominal batch
    (``batch_size`` windows of ``block_size`` tokens, or pairs at their full source and target
    lengths), on one device; ``python -m src.report`` shows it for every variant."""

    params: int
    # the model's FLOPs arguments for the nominal batch (batch_size, seq_len, …)
    shape: dict[str, int]
    tokens_per_step: (
        int  # tokens the model processes per optimizer step (nominal batch x accumulation)
    )
    flops_per_step: int  # training FLOPs per optimizer step
    max_steps: int | None
    match: str  # params | flops | tokens (the protocol's matching mode) | none

    @property
    def flops_per_token(self) -> float:
        return self.flops_per_step / self.tokens_per_step

    def to_dict(self) -> dict[str, Any]:
        planned = self.max_steps if self.max_steps and self.max_steps > 0 else None
        return {
            **asdict(self),
            "flops_per_token": self.flops_per_token,
            "planned_tokens": planned * self.tokens_per_step if planned else None,
            "planned_flops": planned * self.flops_per_step if planned else None,
        }


def nominal_batch(
    batch_format: str, batch_size: int, lengths: tuple[int, int]
) -> dict[str, torch.Tensor]:
    """A batch of the documented formats (docs/CONTRACTS.md) at full length: ``tokens`` [B, T+1],
    or ``src_ids``/``tgt_ids`` [B, S] / [B, T] with masks of ones."""
    src, tgt = lengths
    if batch_format == "pairs":
        return {
            "src_ids": torch.zeros(batch_size, src, dtype=torch.long),
            "src_mask": torch.ones(batch_size, src, dtype=torch.long),
            "tgt_ids": torch.zeros(batch_size, tgt, dtype=torch.long),
            "tgt_mask": torch.ones(batch_size, tgt, dtype=torch.long),
        }
    return {"tokens": torch.zeros(batch_size, src + 1, dtype=torch.long)}


def training_budget(
    task: Any,
    batch_format: str,
    batch_size: int,
    lengths: tuple[int, int],
    accumulate: int = 1,
    max_steps: int | None = None,
    match: str = "none",
) -> Budget:
    """The budget of ``objective`` (an ``LMTask``) on its nominal batch: the task prepares the batch as
    in training and the model counts the FLOPs of the shape it gets."""
    # an objective that draws (masked LM) leaves the run's RNG untouched
    with torch.random.fork_rng(devices=[]):
        prep = task.prepare(nominal_batch(batch_format, batch_size, lengths))
    per_batch = int(task.model.training_flops(**prep.shape))
    return Budget(
        params=task.model.num_parameters(),
        shape=dict(prep.shape),
        tokens_per_step=int(prep.tokens) * accumulate,
        flops_per_step=per_batch * accumulate,
        max_steps=max_steps,
        match=match,
    )


def match_mode(plain: Mapping[str, Any]) -> str:
    """The protocol's matching mode (the node is checked here, so a run with a mistyped protocol
    fails at setup); without a protocol, ``params`` when match_params has a reference, else
    ``none``."""
    protocol = Protocol.from_config(plain)
    if protocol is not None:
        return protocol.match
    return (
        "params"
        if (plain.get("match_params") or {}).get("reference") not in (None, "", "null")
        else "none"
    )


def run_budget(run: Any) -> Budget:
    """The budget of a built run (``src.training.setup.Run``)."""
    dm, plain = run.datamodule, run.cfg
    lengths = (
        int(getattr(dm, "max_src_len", dm.block_size)),
        int(getattr(dm, "max_tgt_len", dm.block_size)),
    )
    trainer = plain.get("trainer") or {}
    steps = trainer.get("max_steps")
    return training_budget(
        run.task,
        run.batch_format,
        int(plain["batch_size"]),
        lengths,
        int(trainer.get("accumulate_grad_batches") or 1),
        int(steps) if steps is not None else None,
        match_mode(plain),
    )


def write_budget(run: Any, run_dir: str | Path | None = None) -> Budget:
    """``<run dir>/budget.json`` (run dir: ``paths.output_dir``), called by ``build_run``."""
    budget = run_budget(run)
    out = run_dir if run_dir is not None else (run.cfg.get("paths") or {}).get("output_dir")
    if out:
        write_json(Path(out) / BUDGET_FILE, budget.to_dict())
    return budget


def solve_steps(
    reference: Budget, budget: Budget, mode: str, reference_steps: int | None = None
) -> int:
    """Optimizer steps at which ``budget``'s training FLOPs (``flops``) or tokens (``tokens``) equal
    the reference's at ``reference_steps`` (default: its max_steps). ``params`` keeps the steps."""
    steps = reference_steps if reference_steps is not None else reference.max_steps
    if mode not in MATCH_MODES:
        raise ConfigError(
            f"protocol.match={mode!r} is not known; use one of {', '.join(MATCH_MODES)}"
        )
    if not steps or steps <= 0:
        raise ConfigError(
            f"matching {mode} needs the reference's trainer.max_steps (> 0), got {steps}"
        )
    if mode == "params":
        return int(steps)
    ref, own = (
        (reference.flops_per_step, budget.flops_per_step)
        if mode == "flops"
        else (reference.tokens_per_step, budget.tokens_per_step)
    )
    return max(1, round(steps * ref / own))
