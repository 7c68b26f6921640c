"""Prompt -> answer, scored on the answer only, for every family (``objective=synthetic``; the synthetic
tasks of ``src/data/sources`` select it, docs/synthetic.md).

A batch is pairs of one shape: ``src_ids [B, P]`` (the prompt), ``tgt_ids [B, A]`` (the answer),
``length [B]`` (the task's size at which they were made). What the model reads depends on what it
can do (``TransformerModel.prompt_is_source``, ``needs_prefix_length``), never on its class::

    decoder_only        one sequence   p_0 … p_{P-1} a_0 … a_{A-2}      (P + A - 1 inputs)
                        scored         a_0 … a_{A-1}, each from the position before it
    model/mask=prefix_lm  the same, the P prompt positions attending to each other bidirectionally
    encoder_decoder     the encoder reads the prompt, the decoder [start, a_0 … a_{A-2}] -> a_0 … a_{A-1}

Metrics per stage and, for the test, per length (the training length gives the plain names):

* ``loss``, ``ppl``, ``acc`` — mean cross-entropy over answer tokens, its exp, teacher-forced argmax
  accuracy (``token_acc`` is the same figure under the name the synthetic docs use);
* ``exact_match`` — share of examples whose whole answer is right when the model decodes it greedily
  after the prompt, the answer length known. Computed from the teacher-forced forward that gives the
  loss: greedy decoding writes the true answer exactly when, fed the true answer so far, the argmax
  at every answer position is the true token (by induction over the positions), so no token-by-token
  decoding is needed (``answers_right``; ``greedy_answers`` decodes them, and a test holds the two
  equal for every family);
* ``test/<metric>@<length>`` for every ``data.test_lengths`` value. A length the model's positions
  cannot represent (a learned table shorter than the sequence: ``PositionLimitError``) is NaN (null
  in metrics.json), and ``<run dir>/synthetic.json`` records why, as the length-extrapolation
  evaluation does.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor

from src.data.tokenizers import Tokenizer
from src.jsonfile import write_json
from src.lightning_compat import attached_trainer
from src.models.components.positions import PositionLimitError
from src.models.families import FAMILIES
from src.models.families.base import IGNORE_INDEX
from src.models.generation import generate
from src.objectives.base import (
    LMTask,
    Prepared,
)
from src.objectives.registry import OBJECTIVES
from src.objectives.special_ids import SpecialIds, decoder_start_override, pick_decoder_start

log = logging.getLogger(__name__)

FILENAME = "synthetic.json"


@OBJECTIVES.register("synthetic")
class Synthetic(LMTask):
    name: ClassVar[str] = "synthetic"
    options: ClassVar[tuple[str, ...]] = ("decoder_start_token_id",)
    families: ClassVar[tuple[str, ...]] = ("decoder_only", "encoder_decoder")
    batch_formats: ClassVar[tuple[str, ...]] = ("pairs",)
    mask_rule: ClassVar[str | None] = "left_to_right"
    mask_hint: ClassVar[str] = (
        "use model/mask=causal, or model/mask=prefix_lm (the prompt as the bidirectional prefix)"
    )

    def __init__(
        self, cfg: dict[str, Any], tokenizer: dict[str, Any] | None = None, **typed: Any
    ) -> None:
        # typed: the validated run's configs (LMTask.__init__)
        super().__init__(cfg, tokenizer, **typed)
        self._sums: dict[tuple[str, int], Tensor] = {}
        self._notes: dict[tuple[str, int], str] = {}
        self.results: dict[
            str, dict[int, dict[str, Any]]
        ] = {}  # stage -> length -> figures (the last epoch's)

    @classmethod
    def family_hint(cls) -> str:
        return "objective=synthetic trains decoder_only (model/mask=causal or prefix_lm) and encoder_decoder models"

    @classmethod
    def special_ids(
        cls, objective_cfg: Mapping[str, Any], tokenizer: Tokenizer, model: Mapping[str, Any]
    ) -> SpecialIds:
        """A decoder that reads the prompt through an encoder starts from a start id (the model's or
        the tokenizer's bos/pad/eos, else a reserved one); a decoder-only model needs none."""
        s = SpecialIds()
        if FAMILIES.get(model["family"]).prompt_is_source:
            pick_decoder_start(s, objective_cfg, tokenizer, model)
        return s

    @classmethod
    def model_overrides(cls, objective_cfg: Mapping[str, Any]) -> dict[str, Any]:
        return decoder_start_override(objective_cfg)

    # ---------------------------------------------------------------- inputs
    def prepare(self, batch: Mapping[str, Tensor]) -> Prepared:
        src, answer = batch["src_ids"], batch["tgt_ids"]  # [B, P], [B, A]
        B, P = src.shape
        # the encoder reads the prompt; the model shifts the answer right itself
        if self.model.prompt_is_source:
            return Prepared(
                inputs={"input_ids": src},
                labels=answer,
                tokens=src.numel() + answer.numel(),
                shape={"batch_size": B, "seq_len": P, "target_len": answer.shape[1]},
            )
        seq = torch.cat([src, answer], dim=1)  # [B, P+A]
        labels = seq.clone()  # the window form: position t predicts labels[:, t+1]
        labels[:, :P] = IGNORE_INDEX  # the prompt is context, never scored
        x = seq[:, :-1]  # [B, P+A-1]
        inputs: dict[str, Any] = {"input_ids": x}
        if self.model.needs_prefix_length:
            # [B]
            inputs["prefix_length"] = torch.full((B,), P, dtype=torch.long, device=src.device)
        return Prepared(
            inputs=inputs,
            labels=labels,
            tokens=x.numel(),
            shape={"batch_size": B, "seq_len": x.shape[1]},
        )

    def greedy_answers(self, batch: Mapping[str, Tensor]) -> Tensor:
        """The answers the model decodes greedily after each prompt, as long as the true ones: [B,
        A]."""
        src = batch["src_ids"]
        seq = generate(self.model, src, int(batch["tgt_ids"].shape[1]))
        return self.model.new_tokens(seq, src)

    def answers_right(self, correct: Tensor, scored: Tensor) -> Tensor:
        """[B] bool: would greedy decoding after the prompt write the whole answer? ``correct``
        and ``scored`` [B, T] are the teacher-forced forward's (argmax = label, answer position).
        Greedy decoding's first token is the argmax after the prompt, the forward's first answer
        position; while it has written the true answer so far, its next token is the argmax
        after that same prefix, the forward's next position. So it writes the whole answer iff
        every answer position's argmax is right (ties go to the lower id in both, as
        ``argmax`` does; ``greedy_answers`` decodes token by token, equal in
        tests/objectives/test_exact_match.py)."""
        return (correct | ~scored).all(dim=1)  # [B]

    # ---------------------------------------------------------------- evaluation
    def _score(self, stage: str, batch: Mapping[str, Tensor]) -> None:
        length = int(batch["length"][0])
        key = (stage, length)
        if key in self._notes:
            return
        try:
            loss, correct, scored, prep = self.shared_step(batch)
        except PositionLimitError as e:  # a learned table shorter than this length's sequence
            self._notes[key] = f"not applicable: {e}"
            return
        self.flops_per_batch = self.flops(prep, training=False)
        exact = self.answers_right(correct, scored)  # [B]
        n = scored.sum()
        sums = torch.stack(
            [
                loss.detach().float() * n,
                n.float(),
                correct.sum().float(),
                exact.sum().float(),
                torch.tensor(float(exact.numel()), device=exact.device),
            ]
        )
        self._sums[key] = self._sums[key] + sums if key in self._sums else sums

    def validation_step(self, batch: Mapping[str, Tensor], batch_idx: int) -> None:
        self._score("val", batch)

    def test_step(
        self, batch: Mapping[str, Tensor], batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        self._score("test", batch)

    def on_validation_epoch_end(self) -> None:
        self._log_lengths("val")

    def on_test_epoch_end(self) -> None:
        self._log_lengths("test")
        self._write_results()

    def _log_lengths(self, stage: str) -> None:
        """Reduce the sums over ranks, log each length's figures (the training length's under the
        plain names)."""
        lengths = sorted({k[1] for k in [*self._sums, *self._notes] if k[0] == stage})
        # the training size is the smallest: validation holds only it, the test lengths are at least
        # it
        train_length = lengths[0] if lengths else -1
        figures: dict[int, dict[str, Any]] = {}
        for length in lengths:
            key = (stage, length)
            if key in self._notes:
                figures[length] = {
                    "loss": math.nan,
                    "token_acc": math.nan,
                    "exact_match": math.nan,
                    "examples": 0,
                    "note": self._notes[key],
                }
                continue
            sums = (
                self.trainer.strategy.reduce(self._sums[key], reduce_op="sum")
                if attached_trainer(self) is not None
                else self._sums[key]
            )
            loss, tokens, correct, exact, examples = (float(v) for v in sums)
            figures[length] = {
                "loss": loss / max(tokens, 1.0),
                "token_acc": correct / max(tokens, 1.0),
                "exact_match": exact / max(examples, 1.0),
                "examples": int(examples),
                "note": None,
            }
        for length, f in figures.items():
            names = {
                "loss": f["loss"],
                "token_acc": f["token_acc"],
                "exact_match": f["exact_match"],
            }
            if length == train_length:
                self.log(f"{stage}/loss", f["loss"], prog_bar=stage == "val", sync_dist=True)
                self.log(f"{stage}/ppl", math.exp(min(f["loss"], 50.0)), sync_dist=True)
                self.log(f"{stage}/acc", f["token_acc"], sync_dist=True)
                for name, value in names.items():
                    if name != "loss":
                        self.log(
                            f"{stage}/{name}",
                            value,
                            prog_bar=stage == "val" and name == "exact_match",
                            sync_dist=True,
                        )
            if stage == "test":
                for name, value in names.items():
                    self.log(f"test/{name}@{length}", value, sync_dist=True)
        self.results[stage] = figures
        self._sums = {k: v for k, v in self._sums.items() if k[0] != stage}
        self._notes = {k: v for k, v in self._notes.items() if k[0] != stage}

    def _write_results(self) -> None:
        """``<run dir>/synthetic.json`` (figures and notes per test length) and a table in the
        log."""
        figures = self.results.get("test", {})
        train_length = min(figures, default=-1)
        lines = [f"{'length':>12}  {'exact_match':>11}  {'token_acc':>9}  {'loss':>8}"]
        for length, f in figures.items():
            tag = f"{length}{' (train)' if length == train_length else ''}"
            if f["note"]:
                lines.append(f"{tag:>12}  {f['note']}")
            else:
                lines.append(
                    f"{tag:>12}  {f['exact_match']:>11.4f}  {f['token_acc']:>9.4f}  "
                    f"{f['loss']:>8.4f}"
                )
        if attached_trainer(self) is None or not self.trainer.is_global_zero:
            return
        log.info(
            "synthetic task, test set per length (data=%s):\n%s",
            (self.cfg.get("data") or {}).get("name"),
            "\n".join(lines),
        )
        out = (self.cfg.get("paths") or {}).get("output_dir")
        if out:
            write_json(
                Path(out) / FILENAME,
                {
                    "data": self.cfg.get("data"),
                    "train_length": train_length,
                    "test": {str(k): v for k, v in figures.items()},
                },
            )
