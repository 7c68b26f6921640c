"""Translation with a decoder-only model: one sequence ``src <sep> tgt``, scored on the
target only, so decoder-only and encoder-decoder models compare on the same pairs.

::

    position   0 … |s|-1   |s|    |s|+1 … |s|+|t|      (then right padding)
    sequence   s_0 … s_n   <sep>  t_0 … t_m(=eos)
    scored                        ✓ …  ✓              (predicted from the position before)

With ``model/mask=prefix_lm`` the source and ``<sep>`` form a bidirectional prefix
(``prefix_length = |s| + 1`` per row), i.e. a prefix LM (Raffel et al. 2020, §3.2.1);
with the default causal mask it is a plain conditional LM.

``<sep>`` is ``objective.sep_token_id`` when set, else the tokenizer's eos (GPT-2's
``<|endoftext|>``), else a reserved id after the tokenizer's vocabulary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor

from src.data.tokenizers import Tokenizer
from src.errors import ConfigError
from src.models.families.base import IGNORE_INDEX
from src.objectives.base import LMTask, Prepared
from src.objectives.registry import OBJECTIVES
from src.objectives.special_ids import SpecialIds


def concat_pairs(
    src: Tensor, src_mask: Tensor, tgt: Tensor, tgt_mask: Tensor, sep_id: int, pad_id: int
) -> tuple[Tensor, Tensor, Tensor]:
    """Right-padded pairs -> (sequence [B, S+1+T], target labels [B, S+1+T], source length + 1 [B]).

    Labels hold the target tokens at their positions in the sequence (IGNORE_INDEX elsewhere),
    not yet shifted. All index arithmetic stays on the device (no host sync).
    """
    B, S = src.shape
    T = tgt.shape[1]
    src_len = src_mask.long().sum(1)  # [B]
    seq = src.new_full((B, S + 1 + T), pad_id)
    labels = src.new_full((B, S + 1 + T), IGNORE_INDEX)
    seq[:, :S] = src.masked_fill(src_mask == 0, pad_id)  # source is left-aligned
    seq.scatter_(1, src_len[:, None], sep_id)  # [B, 1] <sep> right after the source
    tgt_pos = src_len[:, None] + 1 + torch.arange(T, device=src.device)[None, :]  # [B, T]
    seq.scatter_(1, tgt_pos, tgt.masked_fill(tgt_mask == 0, pad_id))
    labels.scatter_(1, tgt_pos, tgt.masked_fill(tgt_mask == 0, IGNORE_INDEX))
    return seq, labels, src_len + 1


@OBJECTIVES.register("decoder_translation")
class DecoderTranslation(LMTask):
    name: ClassVar[str] = "decoder_translation"
    options: ClassVar[tuple[str, ...]] = ("sep_token_id",)
    families: ClassVar[tuple[str, ...]] = ("decoder_only",)
    batch_formats: ClassVar[tuple[str, ...]] = ("pairs",)
    mask_rule: ClassVar[str | None] = "left_to_right"
    mask_hint: ClassVar[str] = (
        "use model/mask=causal, or model/mask=prefix_lm (the source and <sep> as the prefix)"
    )

    def __init__(
        self, cfg: dict[str, Any], tokenizer: dict[str, Any] | None = None, **typed: Any
    ) -> None:
        # typed: the validated run's configs (LMTask.__init__)
        super().__init__(cfg, tokenizer, **typed)
        sep = self.objective_cfg.get("sep_token_id")
        if sep is None:
            raise ConfigError(
                "objective.sep_token_id is not resolved; build the task with "
                "src.training.setup.build_run"
            )
        self.sep_id = int(sep)
        self.pad_id = (
            self.model_config.pad_token_id
            if self.model_config.pad_token_id is not None
            else self.sep_id
        )

    @classmethod
    def special_ids(
        cls, objective_cfg: Mapping[str, Any], tokenizer: Tokenizer, model: Mapping[str, Any]
    ) -> SpecialIds:
        s = SpecialIds()
        s.pick(
            "sep_token_id",
            objective_cfg.get("sep_token_id"),
            tokenizer.eos_token_id,
            base=tokenizer.vocab_size,
        )
        return s

    @classmethod
    def data_block_size(cls, block_size: int, max_seq_len: int, batch_format: str) -> int:
        """Source and target each get half the context (minus the separator)."""
        return min(block_size, (max_seq_len - 1) // 2)

    def prepare(self, batch: Mapping[str, Tensor]) -> Prepared:
        seq, labels, prefix = concat_pairs(
            batch["src_ids"],
            batch["src_mask"],
            batch["tgt_ids"],
            batch["tgt_mask"],
            self.sep_id,
            self.pad_id,
        )
        if seq.shape[1] - 1 > self.model_config.max_seq_len:
            raise ConfigError(
                f"src <sep> tgt is {seq.shape[1] - 1} tokens but model.max_seq_len="
                f"{self.model_config.max_seq_len}; shorten the pairs (data block size) or raise "
                "max_seq_len"
            )
        x = seq[:, :-1]  # [B, L]; labels [B, L+1]: the window form, position t predicts token t+1
        inputs: dict[str, Any] = {"input_ids": x}
        if self.model.needs_prefix_length:
            inputs["prefix_length"] = prefix  # [B]: source + <sep> are bidirectional
        # right padding under a causal / prefix mask never reaches real positions: no padding mask
        # needed
        return Prepared(
            inputs=inputs,
            labels=labels,
            tokens=x.numel(),
            shape={"batch_size": x.shape[0], "seq_len": x.shape[1]},
        )
