"""Causal language modelling (GPT): predict token t+1 from tokens ≤ t.

Text windows ``tokens [B, T+1]`` give inputs ``tokens[:, :-1]`` and targets
``tokens[:, 1:]`` (nanoGPT's ``x, y``). With ``objective.prefix_length=P`` and
``model/mask=prefix_lm`` it is a prefix LM (Raffel et al. 2020, §3.2.1): the first P input
tokens attend to each other bidirectionally, and only the continuation is scored (a
prediction of a token inside the prefix could read that token, so it is not scored).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor

from src.errors import ConfigError
from src.models.components.documents import document_ids, document_mask_of
from src.models.families.base import IGNORE_INDEX
from src.objectives.base import LMTask, Prepared
from src.objectives.registry import OBJECTIVES


@OBJECTIVES.register("causal_lm")
class CausalLM(LMTask):
    name: ClassVar[str] = "causal_lm"
    options: ClassVar[tuple[str, ...]] = ("prefix_length", "loss_chunk_tokens")
    families: ClassVar[tuple[str, ...]] = ("decoder_only",)
    batch_formats: ClassVar[tuple[str, ...]] = ("text",)
    mask_rule: ClassVar[str | None] = "left_to_right"
    mask_hint: ClassVar[str] = (
        "use model/mask=causal, or model/mask=prefix_lm with objective.prefix_length=P for a prefix LM"
    )

    def __init__(
        self, cfg: dict[str, Any], tokenizer: dict[str, Any] | None = None, **typed: Any
    ) -> None:
        # typed: the validated run's configs (LMTask.__init__)
        super().__init__(cfg, tokenizer, **typed)
        self.prefix_length: int | None = self.objective_cfg.get("prefix_length")
        chunk = self.objective_cfg.get("loss_chunk_tokens")
        if chunk is not None and (
            isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1
        ):
            raise ConfigError(
                f"objective.loss_chunk_tokens={chunk!r} must be a positive number of tokens (the "
                "training loss computes the head over that many at a time), e.g. 1024; or null "
                "for the loss over the full logits"
            )
        self.loss_chunk_tokens = chunk
        mask = (self.model_config.mask or {}).get("name", "causal")
        if self.model.needs_prefix_length and self.prefix_length is None:
            raise ConfigError(
                f"model/mask={mask} needs objective.prefix_length (tokens of bidirectional prefix per "
                "window), e.g. objective.prefix_length=32; or use model/mask=causal"
            )
        # data.document_mask: each packed document attends within itself (documents.py)
        self.document_eos: int | None = None
        if document_mask_of(cfg.get("data")):
            eos = self.tokenizer.eos_token_id if self.tokenizer is not None else None
            if eos is None:
                raise ConfigError(
                    "data.document_mask=true needs a tokenizer with an eos id (it ends each "
                    "document in the token cache); use tokenizer=gpt2 or set "
                    "data.document_mask=false"
                )
            self.document_eos = int(eos)
        if self.prefix_length is not None:
            if not self.model.needs_prefix_length:
                raise ConfigError(
                    f"objective.prefix_length={self.prefix_length} needs model/mask=prefix_lm (the "
                    f"model's mask is {mask}); add model/mask=prefix_lm or set "
                    "objective.prefix_length=null"
                )
            if not 0 < self.prefix_length < self.model_config.max_seq_len:
                raise ConfigError(
                    f"objective.prefix_length={self.prefix_length} must be in [1, model.max_seq_len="
                    f"{self.model_config.max_seq_len})"
                )

    def prepare(self, batch: Mapping[str, Tensor]) -> Prepared:
        tokens = batch["tokens"]  # [B, T+1]: position t of tokens[:, :-1] predicts tokens[:, t+1]
        x, labels = (
            tokens[:, :-1],
            tokens,
        )  # the window form of the decoder's labels: every position scored
        inputs: dict[str, Any] = {"input_ids": x}
        if self.prefix_length is not None:
            p = min(self.prefix_length, x.shape[1] - 1)
            labels = labels.clone()
            labels[:, :p] = (
                # targets 1 … p-1 lie inside the prefix, which sees them (token 0 is no target)
                IGNORE_INDEX
            )
            inputs["prefix_length"] = torch.full(
                (x.shape[0],), p, dtype=torch.long, device=x.device
            )
        if self.document_eos is not None:
            inputs["document_ids"] = document_ids(x, self.document_eos)  # [B, T]
        return Prepared(
            inputs=inputs,
            labels=labels,
            tokens=x.numel(),
            shape={"batch_size": x.shape[0], "seq_len": x.shape[1]},
        )
