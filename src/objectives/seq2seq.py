"""Sequence-to-sequence with an encoder-decoder (Vaswani et al. 2017; T5).

* Translation pairs ``{src_ids, src_mask, tgt_ids, tgt_mask}``: the encoder reads the
  source (padding masked), the decoder is teacher-forced on ``[start, y0, …, y_{n-1}]`` and
  scored on ``[y0, …, y_n = eos]`` (target padding not scored).
* Text windows ``tokens [B, T+1]``: the window is split into a prefix (the first
  ``round(split·(T+1))`` tokens, encoded) and its continuation (decoded and scored), the
  encoder-decoder analogue of a prefix LM (Raffel et al. 2020, Fig. 4).

The decoder's start token is ``model.decoder_start_token_id`` / ``bos`` / ``pad`` when set,
else the tokenizer's bos / pad / eos, else a reserved id after the tokenizer's vocabulary;
it is resolved into ``objective.decoder_start_token_id`` and given to the model, which builds the
decoder inputs from the labels (``EncoderDecoder.shift_right``, no host sync).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from torch import Tensor

from src.data.tokenizers import Tokenizer
from src.errors import ConfigError
from src.models.families.base import IGNORE_INDEX
from src.objectives.base import (
    LMTask,
    Prepared,
)
from src.objectives.registry import OBJECTIVES
from src.objectives.special_ids import SpecialIds, decoder_start_override, pick_decoder_start


@OBJECTIVES.register("seq2seq")
class Seq2Seq(LMTask):
    name: ClassVar[str] = "seq2seq"
    options: ClassVar[tuple[str, ...]] = ("split", "decoder_start_token_id")
    families: ClassVar[tuple[str, ...]] = ("encoder_decoder",)
    batch_formats: ClassVar[tuple[str, ...]] = ("text", "pairs")

    def __init__(
        self, cfg: dict[str, Any], tokenizer: dict[str, Any] | None = None, **typed: Any
    ) -> None:
        # typed: the validated run's configs (LMTask.__init__)
        super().__init__(cfg, tokenizer, **typed)
        self.split = float(self.objective_cfg.get("split", 0.5))
        if not 0.0 < self.split < 1.0:
            raise ConfigError(
                f"objective.split={self.split} must be in (0, 1): the fraction of a text window used as "
                "source"
            )
        # model_overrides gave it to the model
        if self.objective_cfg.get("decoder_start_token_id") is None:
            raise ConfigError(
                "objective.decoder_start_token_id is not resolved; build the task with "
                "src.training.setup.build_run (it picks the model's or tokenizer's start id)"
            )

    @classmethod
    def special_ids(
        cls, objective_cfg: Mapping[str, Any], tokenizer: Tokenizer, model: Mapping[str, Any]
    ) -> SpecialIds:
        s = SpecialIds()
        pick_decoder_start(s, objective_cfg, tokenizer, model)
        return s

    @classmethod
    def model_overrides(cls, objective_cfg: Mapping[str, Any]) -> dict[str, Any]:
        return decoder_start_override(objective_cfg)

    @classmethod
    def data_block_size(cls, block_size: int, max_seq_len: int, batch_format: str) -> int:
        return min(block_size, max_seq_len)

    def prepare(self, batch: Mapping[str, Tensor]) -> Prepared:
        if "tokens" in batch:
            tokens = batch["tokens"]  # [B, T+1]
            s = max(1, min(tokens.shape[1] - 1, round(self.split * tokens.shape[1])))
            src, labels = tokens[:, :s], tokens[:, s:]  # [B, S], [B, T+1-S]
            src_mask = None
        else:
            src, src_mask = batch["src_ids"], batch["src_mask"]  # [B, S]
            labels = batch["tgt_ids"].masked_fill(batch["tgt_mask"] == 0, IGNORE_INDEX)  # [B, T]
        # the model teacher-forces its decoder on shift_right(labels) = [start, y0, …]; right
        # padding under a causal decoder never reaches real positions: no decoder mask needed
        inputs = {"input_ids": src, "attention_mask": src_mask}
        return Prepared(
            inputs=inputs,
            labels=labels,
            tokens=src.numel() + labels.numel(),
            shape={
                "batch_size": src.shape[0],
                "seq_len": src.shape[1],
                "target_len": labels.shape[1],
            },
        )
