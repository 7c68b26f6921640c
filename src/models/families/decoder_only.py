"""Decoder-only language model (GPT-2, Llama): one causal stack and an LM head.

::

    ids ─ tok_embed ─ (+positions) ─ blocks × N ─ final norm ─ head (tied to tok_embed) ─ logits

Labels follow transformers: ``labels`` [B, T] are the tokens themselves and position t is
scored against ``labels[t+1]`` (the last position is not scored). A training window of T + 1
tokens can also be passed whole (``labels`` [B, T+1], nanoGPT's ``x, y``): every position is
scored. ``score_labels`` is the one place that shifts.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.nn import functional as F

from src.errors import ConfigError
from src.models.components.kv_cache import KVCache
from src.models.components.masks import MASKS
from src.models.components.positions import Position
from src.models.config import ModelConfig
from src.models.families.base import FAMILIES, IGNORE_INDEX, StackLayout, TransformerModel
from src.models.outputs import Decoding, ModelOutput


@FAMILIES.register("decoder_only")
class DecoderOnly(TransformerModel):
    default_mask = "causal"

    @classmethod
    def check_config(cls, config: ModelConfig) -> None:
        for node in config.layer_mask_nodes() if config.layer_masks is not None else []:
            mask = MASKS.get(node["name"])
            if not (mask.causal or mask.needs_prefix_length):
                raise ConfigError(
                    f"model.layer_masks has '{node['name']}', which lets a token see later ones; "
                    "a decoder_only model predicts the next token: use causal, sliding_window or "
                    "prefix_lm there"
                )

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        self.decoder = self.make_stack(config.n_layer, self.make_mask(), "decoder")
        self.head = self.make_head()
        self.init_weights()

    @classmethod
    def layout(cls, config: ModelConfig) -> list[StackLayout]:
        return [
            StackLayout(
                "decoder",
                "token ids [B, T]",
                config.n_layer,
                (config.mask or {}).get("name", cls.default_mask),
            )
        ]

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        labels: Tensor | None = None,
        *,
        prefix_length: Tensor | None = None,
        cache: KVCache | None = None,
        output_attentions: bool = False,
        logits_to_keep: int = 0,
        document_ids: Tensor | None = None,
    ) -> ModelOutput:
        """input_ids: [B, T]; attention_mask: [B, offset+T] (1 = token, 0 = padding);
        labels: [B, T] or [B, T+1] (see the module docstring); logits_to_keep: 0 = logits at
        every position, n > 0 = at the last n only (decoding needs one: the head is the
        costliest matmul of a small model; transformers' name); document_ids: [B, T] each
        token's document in a packed window (``data.document_mask``, src/models/components/
        documents.py)."""
        if logits_to_keep and labels is not None:
            raise ValueError("logits_to_keep needs labels=None: the loss scores every position")
        out = self.decoder(
            self.embed(input_ids),
            key_padding=attention_mask,
            prefix_length=prefix_length,
            cache=cache,
            need_weights=output_attentions,
            document_ids=document_ids,
        )
        # [B, T|n, V]
        logits = self.logits(out.hidden[:, -logits_to_keep:] if logits_to_keep else out.hidden)
        loss = self.loss(logits, labels) if labels is not None else None
        return ModelOutput(
            logits=logits,
            loss=loss,
            hidden_states=out.hidden,
            attentions=out.attentions,
            cache=cache,
        )

    def hidden_states(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        *,
        prefix_length: Tensor | None = None,
        document_ids: Tensor | None = None,
    ) -> Tensor:
        return self.decoder(
            self.embed(input_ids),
            key_padding=attention_mask,
            prefix_length=prefix_length,
            document_ids=document_ids,
        ).hidden

    def score_labels(self, labels: Tensor, length: int) -> Tensor:
        # Shift the labels, not the logits: logits[:, :-1] would copy [B, T-1, V] forward and
        # scatter it back in backward.
        target = labels[:, 1:]  # [B, T-1] or [B, T]
        if target.shape[1] == length - 1:
            # the last position has nothing to predict
            return F.pad(target, (0, 1), value=IGNORE_INDEX)
        if target.shape[1] != length:
            raise ValueError(
                f"labels {tuple(labels.shape)} fit neither {length} positions nor a window of "
                f"{length + 1}"
            )
        return target

    def tensor_parallel_plan(self, tp: int) -> dict[str, Any]:
        """Megatron's split of every block over ``tp`` ranks (Shoeybi et al. 2019, §3; torchtitan's
        per-model plan): each self-attention by heads, each FFN by its hidden width. Embeddings,
        positions, norms and the tied head stay whole on every rank, so the residual stream is
        the same on all of them."""
        stack = self.decoder
        why = None
        position = type(stack.position) if stack.position is not None else Position
        if position.score_bias is not Position.score_bias:
            why = "model/position adds a score bias per head, which is not split; use rope"
        elif stack.sink_tokens is not None:
            why = "model/sinks=token prepends keys per head, which are not split"
        elif stack.kernel != "sdpa":
            why = f"model.attn_kernel={stack.kernel} has no split; use sdpa"
        for i, block in enumerate(stack.blocks):
            if why is None and block.recurrent:
                why = f"layer {i} mixes tokens with {block.attn.display}, which has no split"
        if why is not None:
            raise ConfigError(f"trainer.tensor_parallel={tp}: {why}, or trainer.tensor_parallel=1")
        plan: dict[str, Any] = {}
        for i, block in enumerate(stack.blocks):
            for part in ("attn", "ffn"):
                for name, style in getattr(block, part).tensor_parallel_plan(tp).items():
                    plan[".".join(filter(None, ("decoder.blocks", str(i), part, name)))] = style
        return plan

    def forward_flops(self, batch_size: int, seq_len: int) -> int:
        return self.decoder.forward_flops(batch_size, seq_len) + self.head_flops(
            batch_size * seq_len
        )

    # -- generation: continue the prompt ------------------------------------------------------
    def start_decoding(
        self,
        input_ids: Tensor,
        max_new_tokens: int,
        *,
        attention_mask: Tensor | None = None,
        prefix_length: Tensor | None = None,
        use_cache: bool = True,
    ) -> Decoding:
        """A prefix-LM decoder reads the whole prompt as its bidirectional prefix unless told
        otherwise. A learned position table has no row past its end: generation then continues from
        the last ``max_seq_len`` tokens without the cache (nanoGPT's ``idx[:, -block_size:]``). Past
        a dynamic RoPE's original length (``cache_limit``) each step recomputes the whole prefix."""
        B, T = input_ids.shape
        if prefix_length is None and self.needs_prefix_length:
            prefix_length = torch.full((B,), T, dtype=torch.long, device=input_ids.device)
        window = self.max_positions
        max_len = T + max_new_tokens if window is None else min(T + max_new_tokens, window)
        cache = (
            KVCache(len(self.decoder.blocks), max_len, windows=self.decoder.cache_windows())
            if use_cache
            else None
        )
        return Decoding(
            input_ids,
            input_ids,
            cache,
            attention_mask=attention_mask,
            prefix_length=prefix_length,
            window=window,
            cache_limit=self.cache_limit,
        )

    def decode_step(self, d: Decoding) -> Tensor:
        seq, mask, prefix = d.sequences, d.attention_mask, d.prefix_length
        # the padding mask grows over generated tokens
        if mask is not None and seq.shape[1] > mask.shape[1]:
            mask = torch.cat(
                [mask, mask.new_ones(seq.shape[0], seq.shape[1] - mask.shape[1])], dim=1
            )
        # past the table: slide the window, no cache
        if d.window is not None and seq.shape[1] > d.window:
            d.cache = None
            shift = seq.shape[1] - d.window
            seq, mask = seq[:, -d.window :], None if mask is None else mask[:, -d.window :]
            prefix = None if prefix is None else (prefix - shift).clamp(min=0)
        if d.cache is not None and d.cache_limit is not None and seq.shape[1] > d.cache_limit:
            # past a dynamic RoPE's original length every rotation changes: recompute the prefix
            d.cache = None
        ids = d.fresh if d.cache is not None else seq
        # head at the end only
        out = self(ids, attention_mask=mask, cache=d.cache, logits_to_keep=1, prefix_length=prefix)
        return out.logits[:, -1]  # [B, V]

    def new_tokens(self, sequences: Tensor, input_ids: Tensor) -> Tensor:
        return sequences[:, input_ids.shape[1] :]  # the output repeats the prompt, as transformers
