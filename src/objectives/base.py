"""What every training objective shares: the model built from plain config, metrics,
optimiser/scheduler, FLOPs/token accounting, RNG state in checkpoints.

A task is a ``LightningModule`` constructed from *plain data only* — the resolved run
config (a dict) and the tokenizer's ``state_dict()`` — never from an injected
``nn.Module``. ``save_hyperparameters`` stores both, so ``load_from_checkpoint`` and
``src.checkpoints.load.load_checkpoint`` rebuild the exact model and tokenizer, and the
checkpoint loads with ``torch.load(weights_only=True)``.

Subclasses implement ``prepare(batch) -> Prepared``: the model inputs, the labels in the
model family's own convention (``-100`` = not scored; the family shifts them: one label
convention, ``TransformerModel.score_labels``), the number of tokens processed and the shape
the model's FLOPs count takes. The loss is the model's (``model(**inputs, labels=…).loss``; in
training, with ``objective.loss_chunk_tokens``, ``model.chunked_loss`` over the hidden states: the
same loss without the [B, T, V] logits); metrics and logging are shared.

Metrics (torchmetrics, reset per epoch, synced across ranks): ``{stage}/loss`` (mean
cross-entropy per scored token, ``MeanMetric`` weighted by token count), ``{stage}/ppl``
(``exp`` of that mean, i.e. per-token perplexity) and ``{stage}/acc`` (top-1 accuracy on the
scored tokens). ``train/loss`` is logged on the steps the loggers write (every
``trainer.log_every_n_steps`` and the last: ``logs_this_step``), without any host-device sync.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import lightning.pytorch as pl
import numpy as np
import torch
from torch import Tensor
from torchmetrics import MeanMetric

from src.data.tokenizers import Tokenizer, tokenizer_from_state
from src.errors import ConfigError
from src.lightning_compat import attached_trainer, should_update_logs
from src.models import ModelConfig, TransformerModel, build_model
from src.models.components.masks import MASKS
from src.models.families import FAMILIES
from src.models.families.base import IGNORE_INDEX
from src.objectives.special_ids import SpecialIds
from src.optim import OptimizerConfig, Schedule, check_pair, optimizer_config, schedule_config


@dataclass
class Prepared:
    """A batch turned into model inputs and scored labels."""

    inputs: dict[str, Any]  # kwargs for the model's forward (without labels)
    # as the model's forward takes them (its family aligns them); IGNORE_INDEX = not scored
    labels: Tensor
    tokens: int  # tokens the model processed (from shapes only: no device sync)
    # the arguments of model.forward_flops for these inputs (batch_size, seq_len, …)
    shape: dict[str, int]


class LMTask(pl.LightningModule):
    """Base class. ``families`` lists the model families the objective fits."""

    name: ClassVar[str] = "base"
    families: ClassVar[tuple[str, ...]] = ()
    #: the ``objective.*`` keys this objective reads besides ``name`` (its conf/objective/<name>.yaml sets
    #: their values); the run-config validation refuses any other key
    options: ClassVar[tuple[str, ...]] = ()
    batch_formats: ClassVar[tuple[str, ...]] = (
        "text",
    )  # "text" {"tokens"} and/or "pairs" {"src_ids", ...}
    #: what the objective needs of the self-attention mask (``check_mask``): "left_to_right",
    #: "bidirectional" or None (the family fixes its masks: encoder_decoder)
    mask_rule: ClassVar[str | None] = None
    mask_hint: ClassVar[str] = ""

    def __init__(
        self,
        cfg: dict[str, Any],
        tokenizer: dict[str, Any] | None = None,
        *,
        model_config: ModelConfig | None = None,
        optimizer_config: OptimizerConfig | None = None,
        schedule_config: Schedule | None = None,
    ) -> None:
        """cfg: the plain resolved run config (``model``, ``objective``, ``optim``, ``scheduler``,
        ``trainer`` …); tokenizer: ``Tokenizer.state_dict()`` (or None for a tokenizer-less model);
        model_config, optimizer_config, schedule_config: the run's typed configs as the run-config
        validation made them (``src.training.setup`` passes them, so nothing is validated twice);
        None (a checkpoint being loaded) validates ``cfg["model"]`` here, and
        ``optim``/``scheduler`` if it trains."""
        super().__init__()
        # plain dicts only -> weights_only-loadable checkpoints; the typed configs are remade from
        # cfg on load
        self.save_hyperparameters(ignore=["model_config", "optimizer_config", "schedule_config"])
        self.optimizer_config, self.schedule_config = optimizer_config, schedule_config
        self.cfg = cfg
        self.objective_cfg: dict[str, Any] = dict(cfg.get("objective") or {})
        if model_config is None:
            model_config = ModelConfig.from_dict(cfg["model"])
            self.check_family(model_config)
        self.model_config = dataclasses.replace(
            model_config, **self.model_overrides(self.objective_cfg)
        )
        self.tokenizer: Tokenizer | None = tokenizer_from_state(tokenizer) if tokenizer else None
        self.model: TransformerModel = build_model(self.model_config)
        for stage in ("val", "test"):
            # nan_strategy="disable": no per-update NaN check (a host sync); a NaN loss shows in the
            # mean
            setattr(self, f"{stage}_loss", MeanMetric(nan_strategy="disable"))
            setattr(self, f"{stage}_acc", MeanMetric(nan_strategy="disable"))
        self.tokens_seen = 0  # training tokens over all ranks (python int, saved in checkpoints)
        self.tokens_per_batch = (
            0  # the last batch's Prepared.tokens: the one token count throughput uses
        )
        self._unlogged_loss: Tensor | None = (
            None  # this step's loss when it was not logged (on_train_batch_end)
        )
        self._flops_memo: dict[tuple[Any, ...], int] = {}
        self._rng_to_restore: dict[str, Any] | None = None
        #: tokens per chunk of the chunked head + loss in training (``training_loss``); None: the
        #: forward's loss over the full logits. An objective that offers it sets it from its config
        self.loss_chunk_tokens: int | None = None

    # ---------------------------------------------------------------- checks
    @classmethod
    def check_family(cls, model: ModelConfig) -> None:
        """The model's family, and its self-attention mask, fit this objective (``ConfigError``
        otherwise)."""
        if model.family not in cls.families:
            raise ConfigError(
                f"objective={cls.name} needs model.family in {list(cls.families)}, but the model is "
                f"{model.family} ({model.name}); {cls.family_hint()}"
            )
        cls.check_mask(model)

    @classmethod
    def check_mask(cls, model: ModelConfig) -> None:
        """``mask_rule`` against the mask the model will use (``model/mask``, else its family's
        default).

        left_to_right: no position may see a later one (a causal mask, or a prefix LM whose prefix
        the loss does not score); bidirectional: every position sees both sides (a masked LM)."""
        name = (model.mask or {}).get("name") or getattr(
            FAMILIES.get(model.family), "default_mask", None
        )
        if cls.mask_rule is None or name is None:
            return
        # with model.layer_masks: the most permissive layer for a left-to-right objective
        names = model.layer_masks or [name]
        ahead = [n for n in names if not (MASKS.get(n).causal or MASKS.get(n).needs_prefix_length)]
        name = ahead[0] if ahead else names[0]
        sees_ahead = bool(ahead)
        if cls.mask_rule == "left_to_right" and sees_ahead:
            raise ConfigError(
                f"objective={cls.name} predicts each token from the tokens before it, but "
                f"model/mask={name} lets every position see the tokens after it, its targets "
                f"included (the loss would fall without learning to predict); {cls.mask_hint}"
            )
        if cls.mask_rule == "bidirectional" and not sees_ahead:
            raise ConfigError(
                f"objective={cls.name} predicts masked tokens from both sides, but model/mask={name} "
                f"hides the tokens after each position; {cls.mask_hint}"
            )

    @classmethod
    def family_hint(cls) -> str:
        return (
            "choose a model of that family, or the task that fits this model: causal_lm / "
            "decoder_translation (decoder_only), masked_lm (encoder_only), seq2seq "
            "(encoder_decoder)"
        )

    @classmethod
    def check_batch_format(cls, fmt: str, data_name: str = "the data") -> None:
        """fmt: "text" or "pairs" (what the datamodule yields)."""
        if fmt not in cls.batch_formats:
            hint = {
                "pairs": "translation pairs fit objective=seq2seq (encoder_decoder) or objective=decoder_translation "
                "(decoder_only)",
                "text": "text windows fit objective=causal_lm, masked_lm or seq2seq",
            }[fmt]
            raise ConfigError(
                f"objective={cls.name} cannot train on {data_name}, which yields {fmt} batches; {hint}"
            )

    @classmethod
    def special_ids(
        cls, objective_cfg: Mapping[str, Any], tokenizer: Tokenizer, model: Mapping[str, Any]
    ) -> SpecialIds:
        """Ids this task needs (resolved into ``objective`` config before the task is built)."""
        return SpecialIds()

    @classmethod
    def model_overrides(cls, objective_cfg: Mapping[str, Any]) -> dict[str, Any]:
        """Model config keys the objective fixes (its resolved special ids), applied before
        building."""
        return {}

    @classmethod
    def data_block_size(cls, block_size: int, max_seq_len: int, batch_format: str) -> int:
        """Tokens per window/side to ask the datamodule for, so inputs fit ``max_seq_len``."""
        return block_size

    # ---------------------------------------------------------------- to implement
    def prepare(self, batch: Mapping[str, Tensor]) -> Prepared:
        raise NotImplementedError

    # ---------------------------------------------------------------- shared steps
    def forward(self, **inputs: Any):  # -> ModelOutput
        return self.model(**inputs)

    def shared_step(
        self, batch: Mapping[str, Tensor], accuracy: bool = True
    ) -> tuple[Tensor, Tensor | None, Tensor, Prepared]:
        """-> (mean loss, per-token correct [N] bool (None without ``accuracy``), scored-token mask,
        prepared).

        Training skips the accuracy: an argmax over [B, T, V] logits is a full extra pass over
        the largest tensor of the step (on CPU about as slow as the loss itself)."""
        prep = self.prepare(batch)
        # this batch's tokens, read by TokenThroughput and the progress bar
        self.tokens_per_batch = prep.tokens
        out = self.model(**prep.inputs, labels=prep.labels)
        # [B, T] aligned with the logits
        target = self.model.score_labels(prep.labels, out.logits.shape[1])
        scored = target != IGNORE_INDEX  # [B, T]
        correct = (out.logits.argmax(-1) == target) & scored if accuracy else None
        return out.loss, correct, scored, prep

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        self._maybe_restore_rng()

    def training_loss(self, prep: Prepared) -> Tensor:
        """The training step's loss. Training reads no logits (no accuracy), so with
        ``loss_chunk_tokens`` the head and the loss run over chunks of tokens and the [B, T, V]
        logits are never held (``TransformerModel.chunked_loss``: the same loss and gradients).
        Under ``compile: true`` the compiled forward is used instead (the compiler fuses its own
        loss)."""
        if self.loss_chunk_tokens is None or self.cfg.get("compile"):
            return self.model(**prep.inputs, labels=prep.labels).loss
        hidden = self.model.hidden_states(**prep.inputs)  # [B, T, C]
        return self.model.chunked_loss(hidden, prep.labels, self.loss_chunk_tokens)

    def training_step(self, batch: Mapping[str, Tensor], batch_idx: int) -> Tensor:
        prep = self.prepare(batch)
        self.tokens_per_batch = prep.tokens  # read by TokenThroughput and the progress bar
        loss = self.training_loss(prep)
        self.tokens_seen += prep.tokens * self.trainer.world_size
        self.flops_per_batch = self.flops(prep, training=True)  # read by TokenThroughput
        self._unlogged_loss = None
        # self.log costs ~1.5 ms of Python; loggers only read logging steps
        if logs_this_step(self.trainer):
            self.log("train/loss", loss, on_step=True, on_epoch=False, prog_bar=True)
        else:
            self._unlogged_loss = loss.detach()
        return loss

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        """A callback that stops the run after ``training_step`` (Lightning's ``Timer`` for
        ``trainer.max_time``) makes this a logging step: log its loss now, not the last logged
        one."""
        if self._unlogged_loss is not None and self.trainer.should_stop:
            self.log("train/loss", self._unlogged_loss, on_step=True, on_epoch=False, prog_bar=True)
        self._unlogged_loss = None

    def _eval_step(self, stage: str, batch: Mapping[str, Tensor], batch_idx: int = 0) -> Tensor:
        loss, correct, scored, prep = self.shared_step(batch)
        self.flops_per_batch = self.flops(prep, training=False)
        n = scored.sum()
        loss_metric: MeanMetric = getattr(self, f"{stage}_loss")
        acc_metric: MeanMetric = getattr(self, f"{stage}_acc")
        loss_metric.update(loss, weight=n)  # token-weighted mean over the epoch
        acc_metric.update(correct.sum() / n.clamp(min=1), weight=n)
        return loss

    def _log_epoch(self, stage: str) -> None:
        loss_metric: MeanMetric = getattr(self, f"{stage}_loss")
        acc_metric: MeanMetric = getattr(self, f"{stage}_acc")
        mean = loss_metric.compute()
        # MeanMetric.compute() has already reduced over ranks; sync_dist only keeps Lightning quiet
        self.log(f"{stage}/loss", mean, prog_bar=stage == "val", sync_dist=True)
        # clamp: no inf early on
        self.log(f"{stage}/ppl", torch.exp(mean.clamp(max=50.0)), sync_dist=True)
        self.log(f"{stage}/acc", acc_metric.compute(), sync_dist=True)
        loss_metric.reset()
        acc_metric.reset()

    def validation_step(self, batch: Mapping[str, Tensor], batch_idx: int) -> Tensor:
        return self._eval_step("val", batch, batch_idx)

    def on_validation_epoch_end(self) -> None:
        self._log_epoch("val")

    def test_step(self, batch: Mapping[str, Tensor], batch_idx: int) -> Tensor:
        return self._eval_step("test", batch, batch_idx)

    def on_test_epoch_end(self) -> None:
        self._log_epoch("test")

    # ---------------------------------------------------------------- throughput
    def flops(self, prep: Prepared, training: bool) -> int:
        """The model's FLOPs count for this batch: ``model.training_flops`` (forward + backward) or
        ``model.forward_flops``, memoised by shape (a few distinct shapes per run)."""
        key = (training, *sorted(prep.shape.items()))
        if key not in self._flops_memo:
            count = self.model.training_flops if training else self.model.forward_flops
            self._flops_memo[key] = count(**prep.shape)
        return self._flops_memo[key]

    # ---------------------------------------------------------------- optimisation
    def configure_model(self) -> None:
        """``compile: true`` compiles the model in place (state-dict keys unchanged)."""
        if self.cfg.get("compile") and not getattr(self, "_compiled", False):
            self.model.compile()
            self._compiled = True

    def _optimizer_config(self) -> OptimizerConfig:
        # not given the run's validated config (a loaded checkpoint): make it
        if self.optimizer_config is None:
            self.optimizer_config = optimizer_config(self.cfg["optim"])
        return self.optimizer_config

    def configure_callbacks(self) -> list[pl.Callback]:
        """The callbacks the optimiser needs (schedule-free's train/eval switch), when training."""
        if not self.cfg.get("optim"):
            return []
        return self._optimizer_config().callbacks()

    def configure_optimizers(self) -> Any:
        trainer = attached_trainer(self)
        clips_mixed = (
            trainer is not None
            and str(trainer.precision).endswith("-mixed")
            and bool(trainer.gradient_clip_val)
        )
        max_steps = (self.cfg.get("trainer") or {}).get("max_steps")
        horizon = max_steps if max_steps and max_steps > 0 else None
        optimizer_cfg = self._optimizer_config()
        # not given the run's validated configs (a loaded checkpoint): make it
        if self.schedule_config is None:
            self.schedule_config = schedule_config(self.cfg.get("scheduler") or {"name": "none"})
            check_pair(optimizer_cfg, self.schedule_config, horizon)
        optimizer = self.optimizer_config.build(
            self.model, self.device, clips_under_mixed_precision=clips_mixed
        )
        scheduler = self.schedule_config.build(optimizer, float(self.optimizer_config.lr), horizon)
        if scheduler is None:
            return optimizer
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step", "frequency": 1},
        }

    # ---------------------------------------------------------------- checkpoint extras
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Store RNG states (plain tensors/lists: weights_only-safe) and the token counter."""
        np_state = np.random.get_state()
        checkpoint["rng_states"] = {
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "numpy": [
                np_state[0],
                np_state[1].tolist(),
                int(np_state[2]),
                int(np_state[3]),
                float(np_state[4]),
            ],
            "python": _to_lists(random.getstate()),
        }
        checkpoint["tokens_seen"] = self.tokens_seen

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if attached_trainer(self) is not None and self.trainer.state.fn != "fit":
            return  # test/validate with a checkpoint: weights only; this run's counters stay
        self.tokens_seen = int(checkpoint.get("tokens_seen", 0))
        # Restored right before the first resumed training batch, after Lightning has rebuilt
        # the dataloader iterator, so the random stream matches an uninterrupted run.
        self._rng_to_restore = checkpoint.get("rng_states")

    def _maybe_restore_rng(self) -> None:
        state, self._rng_to_restore = self._rng_to_restore, None
        if not state:
            return
        torch.set_rng_state(state["torch"].cpu())
        if (
            state.get("cuda")
            and torch.cuda.is_available()
            and len(state["cuda"]) == torch.cuda.device_count()
        ):
            torch.cuda.set_rng_state_all(state["cuda"])
        n = state["numpy"]
        np.random.set_state((n[0], np.asarray(n[1], dtype=np.uint32), n[2], n[3], n[4]))
        random.setstate(_to_tuples(state["python"]))


def logs_this_step(trainer: pl.Trainer) -> bool:
    """Whether this training step's logged values reach the loggers (asked inside
    ``training_step``).

    Lightning writes step metrics only every ``trainer.log_every_n_steps`` optimizer steps (and at
    every step under ``fast_dev_run``); a value logged on another step is only overwritten. The
    run's last step (``max_steps``) and an epoch's last batch are included, so the final
    ``train/loss`` (metrics.json) is the last step's."""
    if trainer.fast_dev_run or should_update_logs(trainer) or trainer.is_last_batch:
        return True
    return 0 < trainer.max_steps <= trainer.global_step + 1


def _to_lists(x: Any) -> Any:
    return [_to_lists(v) for v in x] if isinstance(x, tuple) else x


def _to_tuples(x: Any) -> Any:
    return tuple(_to_tuples(v) for v in x) if isinstance(x, list) else x
