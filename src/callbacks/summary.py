"""Summaries of a run: ``RunSummary`` collects what ``metrics.json`` reports besides the logged
metrics (the validation history for ``best_step``, the training clock for throughput);
``ModelSummary`` prints the model table at the start of fitting, with our own FLOPs count.

**Tokens/s has one definition**, ``RunSummary.tokens_per_s``: the tokens of the training batches
since training (re)started, divided by the wall time since then, validation excluded. The
progress bar shows it as it grows, ``metrics.json``'s ``throughput_tokens_per_s`` is its final
value and the run's last lines print it. (``TokenThroughput`` also logs a windowed, per-device
rate, ``train/device/items_per_sec``, for curves over training; docs/training.md.)"""

from __future__ import annotations

import io
import math
import time
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import RichModelSummary

from src.echo import to_log_file


class RunSummary(pl.Callback):
    """Added by ``src.training.runner`` to every run. Its validation history is saved in
    checkpoints, so ``best_step`` of a resumed run covers the validations before the resume."""

    def __init__(self, monitor: str = "val/loss") -> None:
        self.monitor = monitor
        self.history: list[tuple[int, float]] = []  # (global_step, monitored value) per validation
        self.train_time_s = (
            0.0  # wall time of training since it (re)started, validation excluded (once it ended)
        )
        self._t0: float | None = None  # when training started, while it runs
        self._val_t0: float | None = None
        self._val_s = 0.0  # validation time inside the fit, taken out of the training clock
        self.tokens_trained = 0  # tokens of the training batches since training (re)started
        self.final: dict[
            str, float
        ] = {}  # last value of every logged scalar (updated at stage ends)
        self.tokens_at_start = 0  # the task's token counter when training (re)started
        self.scored: tuple[str, int, str | None] | None = (
            None  # the weights the test scored (src.training.runner)
        )

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.tokens_at_start = int(getattr(pl_module, "tokens_seen", 0))
        self.tokens_trained, self._val_s, self._t0 = 0, 0.0, time.perf_counter()

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        self.tokens_trained = int(getattr(pl_module, "tokens_seen", 0)) - self.tokens_at_start

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._t0 is not None:
            self.train_time_s = self.training_seconds()
            self._t0 = None
        self._collect(trainer)

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        self.on_fit_end(trainer, pl_module)

    def training_seconds(self) -> float:
        """Wall time of training so far (validation excluded); its final value once the fit
        ended."""
        if self._t0 is None:
            return self.train_time_s
        now = time.perf_counter()
        in_validation = now - self._val_t0 if self._val_t0 is not None else 0.0
        return max(now - self._t0 - self._val_s - in_validation, 0.0)

    @property
    def tokens_per_s(self) -> float | None:
        """The run's tokens/s (the module doc's one definition); None before the first step."""
        seconds = self.training_seconds()
        return self.tokens_trained / seconds if self.tokens_trained and seconds > 0 else None

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._t0 is not None and not trainer.sanity_checking:
            self._val_t0 = time.perf_counter()

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._val_t0 is not None:
            self._val_s += time.perf_counter() - self._val_t0
            self._val_t0 = None
        if trainer.sanity_checking:
            return
        value = trainer.callback_metrics.get(self.monitor)
        if value is not None:  # one host sync per validation, not per step
            self.history.append((int(trainer.global_step), float(value)))
        self._collect(trainer)

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._collect(trainer)

    def _collect(self, trainer: pl.Trainer) -> None:
        for k, v in trainer.callback_metrics.items():
            try:
                self.final[k] = float(v)
            except (TypeError, ValueError):
                pass

    @property
    def best(self) -> tuple[int, float] | None:
        finite = [(s, v) for s, v in self.history if math.isfinite(v)]
        return min(finite, key=lambda sv: sv[1]) if finite else None

    def state_dict(self) -> dict[str, Any]:
        return {"history": [[s, v] for s, v in self.history]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.history = [(int(s), float(v)) for s, v in state_dict.get("history", [])]


class ModelSummary(RichModelSummary):
    """Lightning's rich model summary with our FLOPs count instead of its "FLOPs" column.

    Lightning counts FLOPs with a forward pass over ``example_input_array``; our tasks set none
    (a dummy GPT-2 batch would cost a full forward), so its column and "Total FLOPs" read 0.
    This summary drops both and prints the count the training run itself uses for throughput
    and MFU: the model's ``training_flops`` (forward + backward) per token at the run's block size.
    Added by ``src.training.runner`` when ``trainer.enable_model_summary`` is true.
    """

    def __init__(self, seq_len: int | None = None, max_depth: int = 1) -> None:
        super().__init__(max_depth=max_depth)
        self.seq_len = seq_len
        self.depth = max_depth

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self.depth or not trainer.is_global_zero:
            return
        from lightning.pytorch.utilities.model_summary import summarize
        from lightning.pytorch.utilities.model_summary.model_summary import (
            get_formatted_model_size,
            get_human_readable_count,
        )
        from rich import get_console
        from rich.console import Console
        from rich.table import Table

        # Lightning's public summary; its public columns
        s = summarize(pl_module, max_depth=self.depth)
        modes = ["train" if m else "eval" for m in s.training_modes]
        columns = [
            (" ", [str(i) for i in range(len(s.layer_names))]),
            ("Name", s.layer_names),
            ("Type", s.layer_types),
            ("Params", [get_human_readable_count(n) for n in s.param_nums]),
            ("Mode", modes),
        ]
        table = Table(header_style="bold magenta")
        for i, (name, _) in enumerate(columns):
            table.add_column(
                name if i else " ",
                style="dim" if not i else None,
                justify="right" if name.startswith("Params") else "left",
            )
        for row in zip(*(values for _, values in columns)):
            table.add_row(*row)
        grid = Table.grid(expand=True)
        grid.add_row(
            f"[bold]Trainable params[/]: {get_human_readable_count(int(s.trainable_parameters))}"
        )
        grid.add_row(
            f"[bold]Total params[/]: {get_human_readable_count(int(s.total_parameters))} "
            f"({get_formatted_model_size(s.model_size)} MB)"
        )
        flops = getattr(getattr(pl_module, "model", None), "training_flops", None)
        if callable(flops) and self.seq_len:  # the model's own count, as throughput/MFU use it
            per_token = flops(batch_size=1, seq_len=self.seq_len) / self.seq_len
            grid.add_row(
                f"[bold]Training FLOPs per token[/] (forward + backward, T={self.seq_len}): "
                f"{get_human_readable_count(int(per_token))}"
            )
        console = get_console()
        console.print(table)
        console.print(grid)
        # the same text for train.log
        plain = Console(file=io.StringIO(), width=120, color_system=None)
        plain.print(table)
        plain.print(grid)
        text = "\n".join(line.rstrip() for line in plain.file.getvalue().splitlines())  # type: ignore[attr-defined]
        to_log_file("model summary\n" + text.rstrip())
