"""Masked language modelling (BERT, Devlin et al. 2019, §3.1 "Task #1: Masked LM").

Each token of a text window is selected with probability ``mask_prob`` (15%); of the
selected ones 80% become ``[MASK]``, 10% a random token, 10% stay unchanged, and only the
selected positions are scored. No shift: the label at position t is the original token t.

``[MASK]`` is the tokenizer's ``mask_token_id`` when it has one (BERT WordPiece via
``tokenizer=hf``); otherwise (GPT-2 BPE, char) one extra id is reserved right after the
tokenizer's vocabulary (id ``tokenizer.vocab_size``) and ``model.vocab_size`` grows by one.
The resolved id is written into ``objective.mask_token_id`` and saved with the checkpoint.
Random replacements are drawn from the tokenizer's vocabulary only (never reserved ids).
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


@OBJECTIVES.register("masked_lm")
class MaskedLM(LMTask):
    name: ClassVar[str] = "masked_lm"
    options: ClassVar[tuple[str, ...]] = (
        "mask_prob",
        "replace_mask",
        "replace_random",
        "mask_token_id",
    )
    families: ClassVar[tuple[str, ...]] = ("encoder_only",)
    batch_formats: ClassVar[tuple[str, ...]] = ("text",)
    mask_rule: ClassVar[str | None] = "bidirectional"
    mask_hint: ClassVar[str] = "use model/mask=bidirectional (BERT)"

    def __init__(
        self, cfg: dict[str, Any], tokenizer: dict[str, Any] | None = None, **typed: Any
    ) -> None:
        # typed: the validated run's configs (LMTask.__init__)
        super().__init__(cfg, tokenizer, **typed)
        t = self.objective_cfg
        self.mask_prob = float(t.get("mask_prob", 0.15))
        self.replace_mask = float(t.get("replace_mask", 0.8))
        self.replace_random = float(t.get("replace_random", 0.1))
        if not 0.0 < self.mask_prob < 1.0:
            raise ConfigError(f"objective.mask_prob={self.mask_prob} must be in (0, 1)")
        if (
            self.replace_mask < 0
            or self.replace_random < 0
            or self.replace_mask + self.replace_random > 1.0
        ):
            raise ConfigError(
                f"objective.replace_mask={self.replace_mask} + "
                f"objective.replace_random={self.replace_random} must be non-negative and sum to at "
                "most 1 (the rest keeps the original token)"
            )
        if t.get("mask_token_id") is None:
            raise ConfigError(
                "objective.mask_token_id is not resolved; build the task with "
                "src.training.setup.build_run (it picks the tokenizer's [MASK] or reserves an id)"
            )
        self.mask_token_id = int(t["mask_token_id"])
        # random replacements come from the real vocabulary, not from reserved ids
        self.random_vocab = (
            self.tokenizer.vocab_size
            if self.tokenizer is not None
            else self.model_config.vocab_size
        )
        self._generator: torch.Generator | None = (
            None  # fixed masks in evaluation (comparable across evals)
        )

    @classmethod
    def special_ids(
        cls, objective_cfg: Mapping[str, Any], tokenizer: Tokenizer, model: Mapping[str, Any]
    ) -> SpecialIds:
        s = SpecialIds()
        s.pick(
            "mask_token_id",
            objective_cfg.get("mask_token_id"),
            tokenizer.mask_token_id,
            base=tokenizer.vocab_size,
        )
        return s

    def _eval_step(self, stage: str, batch: Mapping[str, Tensor], batch_idx: int = 0) -> Tensor:
        """Evaluation masks come from a generator seeded by the batch index: the same
        positions are masked at every evaluation, and the global RNG is left alone."""
        self._generator = torch.Generator(device=self.device).manual_seed(
            int(self.cfg.get("seed") or 0) + batch_idx
        )
        try:
            return super()._eval_step(stage, batch, batch_idx)
        finally:
            self._generator = None

    def prepare(self, batch: Mapping[str, Tensor]) -> Prepared:
        tokens = batch["tokens"][:, :-1]  # [B, T]: the window without its extra next-token
        g, dev = self._generator, tokens.device
        u = torch.rand(tokens.shape, device=dev, generator=g)
        selected = u < self.mask_prob  # [B, T]
        labels = tokens.masked_fill(~selected, IGNORE_INDEX)
        # split the selected positions 80/10/10 with a second draw
        v = torch.rand(tokens.shape, device=dev, generator=g)
        to_mask = selected & (v < self.replace_mask)
        to_random = (
            selected & (v >= self.replace_mask) & (v < self.replace_mask + self.replace_random)
        )
        random_ids = torch.randint(0, self.random_vocab, tokens.shape, device=dev, generator=g)
        inputs = torch.where(to_mask, torch.full_like(tokens, self.mask_token_id), tokens)
        inputs = torch.where(to_random, random_ids, inputs)
        return Prepared(
            inputs={"input_ids": inputs},
            labels=labels,
            tokens=tokens.numel(),
            shape={"batch_size": tokens.shape[0], "seq_len": tokens.shape[1]},
        )
