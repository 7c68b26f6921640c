"""Mechanistic probes tracked over training (``docs/probes.md``)::

    python -m src.train ... callbacks.probes.every_n_steps=50     # 0 (the default) = off

Every ``every_n_steps`` optimizer steps (and once before the first) the callback runs every probe of
``src.probes`` on a fixed batch of repeated random tokens, drawn once from ``seed`` with a generator
of its own, in eval mode and without gradients; each module's train/eval mode is restored after.
Nothing it does touches the training RNG, the data order or the weights, so a run takes
bit-identical steps with and without it (tests/callbacks/test_probes_callback.py).

The figures (``probe/induction@L<l>H<h>``, ``probe/induction_max``, ``probe/prev_token_max``,
``probe/icl_score``, ``probe/attn_entropy@L<l>``, ``probe/sink_mass@L<l>``,
``probe/lens_loss@L<l>``) go to every logger at the step they were taken (optimizer steps done) and
their last values to ``metrics.json``, with the run-level ``probe/induction_step``: the first probed
step at which ``probe/induction_max`` exceeded ``induction_threshold``, or null and
``probe/induction_step_reason`` when it never did. A probe that does not apply to the model is
skipped with one logged reason."""

from __future__ import annotations

import logging
from typing import Any

import lightning.pytorch as pl
import torch

from src.callbacks.preemption import preempted, stop_if_preempted
from src.errors import ConfigError
from src.models import TransformerModel
from src.probes import ProbeBatch, probe_batch, run_probes
from src.probes.batch import DEFAULT_CAP, check_length, default_length
from src.probes.suite import ProbeResult, check_positions

log = logging.getLogger(__name__)
KEY = "callbacks.probes"
INDUCTION_STEP = "probe/induction_step"


def _int(value: Any, key: str, low: int, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{KEY}.{key}={value!r} must be an integer >= {low}; {fix}")
    return value


class Probes(pl.Callback):
    """Runs ``src.probes.run_probes`` every ``every_n_steps`` optimizer steps (0 = off)."""

    def __init__(
        self,
        every_n_steps: int = 0,
        induction_threshold: float = 0.4,
        batch_size: int = 16,
        length: int | None = None,
        seed: int = 0,
        icl_early: int | None = None,
        icl_late: int | None = None,
    ) -> None:
        self.every_n_steps = _int(
            every_n_steps,
            "every_n_steps",
            0,
            f"e.g. {KEY}.every_n_steps=50, or 0 to turn the probes off",
        )
        if (
            isinstance(induction_threshold, bool)
            or not isinstance(induction_threshold, (int, float))
            or not 0 < induction_threshold < 1
        ):
            raise ConfigError(
                f"{KEY}.induction_threshold={induction_threshold!r} must be a number in (0, 1) (an "
                f"attention probability); e.g. {KEY}.induction_threshold=0.4"
            )
        self.induction_threshold = float(induction_threshold)
        self.batch_size = _int(batch_size, "batch_size", 1, f"e.g. {KEY}.batch_size=16 sequences")
        if length is not None:
            _int(
                length,
                "length",
                4,
                f"two copies of length/2 tokens, e.g. {KEY}.length=64 (null: the longest up "
                f"to {DEFAULT_CAP})",
            )
        self.length = length
        self.seed = _int(
            seed, "seed", 0, "e.g. callbacks.probes.seed=${seed} (the run's seed, the default) or 0"
        )
        # each position's own range first: a wrong value is named before a missing partner
        longest = length if length is not None else DEFAULT_CAP
        for key, value, low, example in (
            ("icl_early", icl_early, 1, 8),
            ("icl_late", icl_late, 2, 40),
        ):
            if value is None:
                continue
            fix = (
                f"a position of the probe sequence in [{low}, {longest - 1}], "
                f"e.g. {KEY}.{key}={example}"
            )
            _int(value, key, low, fix)
            if value >= longest:
                raise ConfigError(
                    f"{KEY}.{key}={value} is past the probe sequence ({longest} tokens"
                    f"{'' if length is not None else f' at most, {KEY}.length=null'}); "
                    f"give {fix}"
                )
        if (icl_early is None) != (icl_late is None):
            raise ConfigError(
                f"{KEY}.icl_early={icl_early!r} and {KEY}.icl_late={icl_late!r}: set both "
                "positions or neither (null: the middle of each copy)"
            )
        self.icl = (icl_early, icl_late) if icl_early is not None else None
        self.batch: ProbeBatch | None = None
        self.last: ProbeResult | None = None
        self.last_step: int | None = None
        self.induction_step: int | None = None
        self.best: tuple[float, int] | None = None  # highest induction_max seen and its step
        self._reasons: set[str] = set()

    @property
    def enabled(self) -> bool:
        return self.every_n_steps > 0

    # -- Lightning hooks -------------------------------------------------------------------
    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self.enabled:
            return
        model = self._model(pl_module)
        length = self.length if self.length is not None else default_length(model)
        try:
            check_length(length, model, key=f"{KEY}.length")
            if self.icl is not None:
                check_positions(*self.icl, length)
        except ValueError as e:
            raise ConfigError(
                str(e)
                if isinstance(e, ConfigError)
                else f"{KEY}.icl_early/icl_late: {e}; give positions of the probe sequence"
            ) from None
        self.batch = probe_batch(model, self.batch_size, length, self.seed)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.enabled and trainer.global_step == 0:
            stop_if_preempted(trainer)  # a signal during the set-up: no step to save yet
            self.probe(trainer, pl_module)  # at initialisation: where each curve starts

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        step = int(trainer.global_step)
        if self.enabled and step and step % self.every_n_steps == 0 and step != self.last_step:
            # once per optimizer step, also under gradient accumulation
            self.probe(trainer, pl_module)

    # -- the probe ---------------------------------------------------------------------------
    @staticmethod
    def _model(pl_module: pl.LightningModule) -> TransformerModel:
        return getattr(pl_module, "model", pl_module)

    def probe(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> ProbeResult | None:
        step = int(trainer.global_step)
        self.last_step = step
        if self.batch is None:
            return None
        if preempted(trainer):
            # skipped: the step boundary right after stops the run and writes its checkpoint
            return None
        # every rank runs the same probe (a sharded model needs all ranks in its forward); rank 0
        # logs
        model = self._model(pl_module)
        # the model moved after fit start: the same batch, redrawn there
        if self.batch.tokens.device != model.device:
            self.batch = probe_batch(model, self.batch_size, self.batch.length, self.seed)
        modes = {m: m.training for m in model.modules()}
        model.eval()  # dropout off; the explicit attention path returns the probabilities
        try:
            with torch.no_grad():
                result = run_probes(model, self.batch, self.icl)
        finally:
            for m, training in modes.items():
                m.training = training
        # once per run
        new = {p: why for p, why in result.skipped.items() if p not in self._reasons}
        for why in dict.fromkeys(new.values()):  # one line per reason, naming the probes it skips
            probes = [p for p, w in new.items() if w == why]
            if trainer.is_global_zero:
                log.info(
                    "probe%s %s skipped: %s", "s" if len(probes) > 1 else "", ", ".join(probes), why
                )
        self._reasons.update(new)
        metrics = result.metrics()
        peak = result.induction_max
        if peak is not None:
            if self.best is None or peak > self.best[0]:
                self.best = (peak, step)
            if self.induction_step is None and peak > self.induction_threshold:
                self.induction_step = step
                metrics[INDUCTION_STEP] = float(step)
        self.last = result
        if trainer.is_global_zero:
            for lg in trainer.loggers:
                lg.log_metrics(metrics, step=step)
        return result

    # -- metrics.json and checkpoints ---------------------------------------------------------
    def run_record(self) -> dict[str, Any]:
        """What ``metrics.json`` gets (src.training.runner): the last probed values and the
        induction step."""
        if not self.enabled or self.last is None:
            return {}
        record: dict[str, Any] = dict(self.last.metrics())
        if self.last.induction_max is None:
            return record  # induction does not apply: its reason is in the log, no step to report
        record[INDUCTION_STEP] = self.induction_step
        if self.induction_step is None:
            peak = f"{self.best[0]:.3f} at step {self.best[1]}" if self.best else "none"
            record[f"{INDUCTION_STEP}_reason"] = (
                f"not reached: probe/induction_max stayed at or below "
                f"induction_threshold={self.induction_threshold:g} (highest {peak})"
            )
        return record

    def state_dict(self) -> dict[str, Any]:
        return {
            "induction_step": self.induction_step,
            "best": list(self.best) if self.best else None,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.induction_step = state_dict.get("induction_step")
        best = state_dict.get("best")
        self.best = (float(best[0]), int(best[1])) if best else None
