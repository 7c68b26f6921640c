"""What every family shares: token embedding, stacks built from the config, the head,
initialisation and the loss."""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from src.models.components.block import Block, Stack
from src.models.components.ffn import FFNS
from src.models.components.loss import cross_entropy
from src.models.components.masks import MASKS, AttentionMask
from src.models.components.norms import NORMS
from src.models.components.positions import POSITIONS
from src.models.components.residual import PLACEMENTS
from src.models.config import ModelConfig
from src.registry import Registry

FAMILIES: Registry["TransformerModel"] = Registry("family")

IGNORE_INDEX = -100  # label value that is not scored (transformers' convention)


class TransformerModel(nn.Module):
    """Base of the three families. Subclasses set ``default_mask`` and build their stacks."""

    default_mask: str | None = None

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.tok_embed = nn.Embedding(config.padded_vocab_size, config.d_model)
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embeddings else 1.0

    # -- construction helpers -------------------------------------------------------
    def make_norm(self) -> nn.Module:
        return NORMS.build(self.config.norm, d_model=self.config.d_model, bias=self.config.bias)

    def make_mask(self) -> AttentionMask | None:
        node = self.config.mask or ({"name": self.default_mask} if self.default_mask else None)
        return MASKS.build(node) if node else None

    def make_stack(self, n_layer: int, mask: AttentionMask | None, cross_attention: bool = False) -> Stack:
        c = self.config
        placement = PLACEMENTS.build({"name": c.norm_placement})

        def make_ffn() -> nn.Module:
            return FFNS.build(c.ffn, d_model=c.d_model, d_ff=c.d_ff, bias=c.bias, dropout=c.dropout)

        blocks = [
            Block(c.d_model, c.n_head, c.kv_heads, self.make_norm, make_ffn, placement, c.bias, c.dropout, cross_attention)
            for _ in range(n_layer)
        ]
        position = POSITIONS.build(
            c.position, d_model=c.d_model, max_seq_len=c.max_seq_len, n_head=c.n_head, head_dim=c.head_dim
        )
        return Stack(
            blocks,
            position,
            mask,
            final_norm=self.make_norm() if placement.final_norm else None,
            embed_norm=self.make_norm() if c.embedding_norm else None,
            dropout=c.dropout,
        )

    def make_head(self, bias: bool = False) -> nn.Linear:
        head = nn.Linear(self.config.d_model, self.config.padded_vocab_size, bias=bias)
        if self.config.tie_embeddings:
            head.weight = self.tok_embed.weight  # Press & Wolf 2017: one matrix in and out
        return head

    def init_weights(self) -> None:
        """GPT-2 initialisation (as nanoGPT): N(0, 0.02) for matrices and embeddings, zero
        biases, and residual output projections scaled by 1/√(2·layers) (Radford et al. 2019, §2.3)."""
        std = self.config.init_std
        n_residual = 2 * sum(1 for m in self.modules() if isinstance(m, Block))
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                s = std / math.sqrt(n_residual) if name.endswith(("attn.out", "ffn.down")) else std
                nn.init.normal_(module.weight, 0.0, s)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, std)

    # -- shared forward pieces --------------------------------------------------------
    def check_ids(self, input_ids: Tensor) -> None:
        """Fail loudly on ids outside the vocabulary. On CPU a plain check; on an accelerator
        an asynchronous device assert (``int(max)`` there would stall every step on a
        host-device sync); skipped inside ``torch.compile`` (it would break the graph)."""
        if not input_ids.numel() or torch.compiler.is_compiling():
            return
        V = self.config.vocab_size
        if input_ids.device.type == "cpu":
            if int(input_ids.max()) >= V:
                raise ValueError(
                    f"token id {int(input_ids.max())} is out of range for model.vocab_size={V}; "
                    f"the tokenizer's vocabulary is larger than the model's"
                )
        else:
            torch._assert_async(input_ids.max() < V, f"a token id is out of range for model.vocab_size={V}")

    def embed(self, input_ids: Tensor) -> Tensor:
        self.check_ids(input_ids)
        x = self.tok_embed(input_ids)  # [B, T] -> [B, T, C]
        return x * self.embed_scale if self.embed_scale != 1.0 else x

    def logits(self, hidden: Tensor) -> Tensor:
        logits = self.head(hidden)  # [B, T, C] -> [B, T, V_padded]
        if self.config.padded_vocab_size != self.config.vocab_size:
            logits = logits[..., : self.config.vocab_size]  # padded rows are never predicted
        return logits

    @staticmethod
    def cross_entropy(logits: Tensor, labels: Tensor) -> Tensor:
        """Mean over labelled tokens; logits [B, T, V], labels [B, T] (-100 = not scored)."""
        return cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE_INDEX)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())  # tied weights counted once

    @property
    def device(self) -> torch.device:
        return self.tok_embed.weight.device
