"""What every family shares, and everything a consumer may ask of a model.

Generation, evaluation, callbacks, inspection and benchmarks use only the methods below; what
differs between families is implemented by each family, so a consumer never asks which family
it holds (no ``isinstance`` on a family outside ``src/models/families``)::

    forward(...)                       ModelOutput: logits, and the loss when labels are given
    score_labels(labels, T), loss(…)   the one label convention: labels aligned with the logits
    hidden_states(...), logits(h)      the states before the head, and the head (applied where scored)
    chunked_loss(h, labels, n)         loss(logits(h), labels) n tokens at a time (no [B, T, V])
    forward_flops(B, T), training_flops(B, T)
    start_decoding(...), decode_step(d), new_tokens(seq, prompt)      generation with the KV cache
    attention_probs(...)               every attention map, named (self / encoder / decoder / cross)
    needs_prefix_length, max_positions, cache_limit, stacks(), num_parameters(), device
    hidden_matrices()                  the attention and FFN weights (Muon's parameters)
    parallel_blocks()                  the blocks FSDP2 and activation checkpointing wrap one by one
    left_to_right                      defines p(x_t | x_<t): generation and log-likelihood scoring
    prompt_is_source                   a prompt is read by an encoder; the output does not repeat it
                                       and begins with start_tokens(batch, device)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from src.errors import ConfigError
from src.models.components.block import Block, Stack
from src.models.components.chunked_loss import chunked_cross_entropy
from src.models.components.differential import ATTENTIONS
from src.models.components.ffn import FFNS
from src.models.components.flops import linear_flops
from src.models.components.init import INITS
from src.models.components.loss import cross_entropy
from src.models.components.masks import MASKS, AttentionMask
from src.models.components.norms import NORMS
from src.models.components.parametrization import PARAMETRIZATIONS, Rule
from src.models.components.positions import POSITIONS
from src.models.components.qk_norm import QK_NORMS
from src.models.components.residual import PLACEMENTS
from src.models.components.sinks import SINKS
from src.models.config import ModelConfig
from src.models.mixers.layers import build_mixers
from src.models.outputs import AttentionProbs, Decoding
from src.registry import Registry

FAMILIES: Registry[TransformerModel] = Registry("family", package="src.models.families")


@dataclass(frozen=True)
class StackLayout:
    """How one of a family's stacks reads, for diagrams (``src.inspection.diagram``)."""

    name: str  # "decoder" / "encoder": the attribute, and the diagram's title
    inputs: str  # what its token ids are ("token ids [B, T]", "source ids [B, S]")
    n_layer: int
    mask: str  # the registered mask of its self-attention
    cross: bool = False  # reads the previous stack's output (memory) through cross-attention
    then: str | None = None  # a module between the stack and the head ("MLM transform")


IGNORE_INDEX = -100  # label value that is not scored (transformers' convention)


class TransformerModel(nn.Module):
    """Base of the families. Subclasses set ``default_mask``, build their stacks and implement
    the consumer methods that differ (see the module docstring)."""

    default_mask: ClassVar[str | None] = None
    left_to_right: ClassVar[bool] = True
    prompt_is_source: ClassVar[bool] = False

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.tok_embed = nn.Embedding(config.padded_vocab_size, config.d_model)
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embeddings else 1.0
        # model/parametrization: sp, or μP's init, rates, 1/D attention and output multiplier
        self.parametrization = PARAMETRIZATIONS.build(
            config.parametrization, d_model=config.d_model
        )

    @classmethod
    def check_config(cls, config: ModelConfig) -> None:
        """The family's own rules on a config (raise ConfigError naming the key and the fix)."""

    @classmethod
    def derive(cls, config: dict[str, Any]) -> dict[str, Any]:
        """The plain model config as this family reads it: a key another family's defaults set,
        which says nothing this family can use, is derived from the family here (before
        ``check_config``, which refuses what the family cannot honour)."""
        return config

    # -- construction helpers -------------------------------------------------------
    def make_norm(self) -> nn.Module:
        return NORMS.build(self.config.norm, **self.config.component_context())

    def make_mask(self) -> AttentionMask | None:
        node = self.config.mask or ({"name": self.default_mask} if self.default_mask else None)
        return MASKS.build(node) if node else None

    def make_layer_masks(self, n_layer: int) -> list[AttentionMask] | None:
        """One mask per layer from ``model.layer_masks`` (None without it: every layer shares the
        stack's mask); layers with the same entry share one object, so each distinct mask is
        built once per forward."""
        if self.config.layer_masks is None:
            return None
        built: dict[str, AttentionMask] = {}
        out = []
        for node in self.config.layer_mask_nodes(n_layer):
            if node["name"] not in built:
                built[node["name"]] = MASKS.build(node)
            out.append(built[node["name"]])
        return out

    @classmethod
    def residual_context(
        cls, config: ModelConfig, n_layer: int, stack: str, cross_attention: bool
    ) -> dict[str, Any]:
        """What a placement's constructor may ask for (``residual.py``), for one of the family's
        stacks."""
        depths = {s.name: s.n_layer for s in cls.layout(config)}
        return dict(
            config.component_context(),
            n_layer=n_layer,
            n_sublayers=3 if cross_attention else 2,
            stack=stack,
            encoder_layers=depths.get("encoder", 0),
            decoder_layers=depths.get("decoder", 0),
        )

    @classmethod
    def check_placement(cls, config: ModelConfig) -> None:
        """The placement's own checks (``check_args``) for each stack, without building (DeepNorm
        needs the depths)."""
        for s in cls.layout(config):
            PLACEMENTS.check(
                {"name": config.norm_placement},
                **cls.residual_context(config, s.n_layer, s.name, s.cross),
            )

    def make_stack(
        self, n_layer: int, mask: AttentionMask | None, stack: str, cross_attention: bool = False
    ) -> Stack:
        """``stack``: "encoder" or "decoder" (placements and positions may depend on it)."""
        c = self.config
        context = c.component_context()
        placement = PLACEMENTS.get(c.norm_placement)
        residual_context = dict(
            self.residual_context(c, n_layer, stack, cross_attention), make_norm=self.make_norm
        )

        def make_residual():  # -> Residual, one per sublayer
            return PLACEMENTS.build({"name": c.norm_placement}, **residual_context)

        def make_ffn() -> nn.Module:
            return FFNS.build(c.ffn, **context)

        qk_norm = QK_NORMS.build(c.qk_norm, **context)
        sinks = SINKS.build(c.sinks, **context)
        self_attention = ATTENTIONS.build(c.attention, **context)
        layer_masks = self.make_layer_masks(n_layer)
        # model/mixer: the causal stacks only (a bidirectional encoder keeps attention)
        mixers = build_mixers(c, n_layer) if stack == "decoder" else [None] * n_layer
        blocks = [
            Block(
                c.d_model,
                c.n_head,
                c.kv_heads,
                self.make_norm,
                make_ffn,
                make_residual,
                c.bias,
                c.dropout,
                cross_attention,
                head_dim=c.d_head,
                attn_scale=self.parametrization.attn_scale(c.attn_scale, c.head_dim),
                qk_norm=qk_norm,
                attn_softcap=c.attn_softcap,
                sinks=sinks,
                self_attention=self_attention,
                layer=i,
                mixer=mixers[i],
            )
            for i in range(n_layer)
        ]
        position = POSITIONS.build(
            c.position, **context, causal=bool(mask is not None and mask.causal)
        )
        return Stack(
            blocks,
            position,
            mask,
            final_norm=self.make_norm() if placement.final_norm else None,
            embed_norm=self.make_norm() if c.embedding_norm else None,
            dropout=c.dropout,
            layer_masks=layer_masks,
            sink_tokens=nn.Embedding(sinks.count, c.d_model) if sinks.count else None,
            kernel=c.attn_kernel,
        )

    def make_head(self, bias: bool = False) -> nn.Linear:
        head = nn.Linear(self.config.d_model, self.config.padded_vocab_size, bias=bias)
        if self.config.tie_embeddings:
            head.weight = self.tok_embed.weight  # Press & Wolf 2017: one matrix in and out
        return head

    @classmethod
    def layout(cls, config: ModelConfig) -> list[StackLayout]:
        """The stacks in forward order (built from the config alone: diagrams need no model)."""
        raise NotImplementedError

    def init_weights(self) -> None:
        """The configured scheme (``model/init``, ``src/models/components/init.py``; GPT-2's by
        default: N(0, 0.02), zero biases, residual output projections / √(2·layers)) on every linear
        layer and embedding; then each placement may adjust its sublayer
        (``Residual.init_sublayer``)."""
        n_residual = 2 * sum(1 for m in self.modules() if isinstance(m, Block))
        INITS.build(self.config.init, std=self.config.init_std).apply(self, n_residual)
        for block in (m for m in self.modules() if isinstance(m, Block)):
            for residual, sublayer in block.sublayers():
                residual.init_sublayer(sublayer)
        self.parametrization.init(self)  # μP: hidden weights' std / √(fan_in multiplier)

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
            torch._assert_async(
                input_ids.max() < V, f"a token id is out of range for model.vocab_size={V}"
            )

    def embed(self, input_ids: Tensor) -> Tensor:
        self.check_ids(input_ids)
        x = self.tok_embed(input_ids)  # [B, T] -> [B, T, C]
        return x * self.embed_scale if self.embed_scale != 1.0 else x

    def logits(self, hidden: Tensor) -> Tensor:
        """The head on ``hidden_states``: [..., C] -> [..., V] (at any subset of positions). With
        ``scale_head`` (T5 v1.0, Mesh TF) the states are first multiplied by d_model^-0.5."""
        if self.config.scale_head:
            hidden = hidden * self.config.d_model**-0.5
        if self.parametrization.output_mult != 1.0:  # μP's readout multiplier 1/m (TP5 Table 8)
            hidden = hidden * self.parametrization.output_mult
        logits = self.head(hidden)  # [B, T, C] -> [B, T, V_padded]
        if self.config.padded_vocab_size != self.config.vocab_size:
            logits = logits[..., : self.config.vocab_size]  # padded rows are never predicted
        cap = self.config.final_softcap
        if cap is not None:  # Gemma 2 (Team et al. 2024, §2): cap · tanh(logits / cap)
            logits = cap * torch.tanh(logits / cap)
        return logits

    def hidden_states(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, **inputs: Any
    ) -> Tensor:
        """The forward up to the final norm, without the head: [B, T] -> [B, T, C]."""
        raise NotImplementedError

    # -- the label convention -------------------------------------------------------------
    def score_labels(self, labels: Tensor, length: int) -> Tensor:
        """``labels`` as the forward takes them -> the target of each of the ``length`` logit
        positions [B, length] (IGNORE_INDEX = not scored). Here: already aligned (no shift)."""
        if labels.shape[1] != length:
            raise ValueError(
                f"labels {tuple(labels.shape)} do not align with {length} logit positions"
            )
        return labels

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        """Mean cross-entropy over the scored tokens; logits [B, T, V], labels as the forward takes
        them."""
        target = self.score_labels(labels, logits.shape[1])
        return cross_entropy(
            logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=IGNORE_INDEX
        )

    def chunked_loss(self, hidden: Tensor, labels: Tensor, chunk_tokens: int) -> Tensor:
        """``loss(logits(hidden), labels)`` without the [B, T, V] logits: the head and the
        cross-entropy ``chunk_tokens`` rows at a time (``chunked_cross_entropy``); the same value
        and gradients. hidden [B, T, C]; labels as the forward takes them."""
        target = self.score_labels(labels, hidden.shape[1])  # [B, T]
        return chunked_cross_entropy(
            hidden.reshape(-1, hidden.shape[-1]),  # [B, T, C] -> [B·T, C]
            target.reshape(-1),  # [B·T]
            self.logits,
            self.head_parameters,  # read only when the rows are chunked
            chunk_tokens,
            IGNORE_INDEX,
        )

    def head_parameters(self) -> list[nn.Parameter]:
        """Every parameter ``logits`` may read: those outside the stacks (the head, a tied
        embedding, a family's head transform); the chunked loss returns their gradients."""
        in_stacks = {id(p) for s in self.stacks().values() for p in s.parameters()}
        return [p for p in self.parameters() if id(p) not in in_stacks]

    # -- FLOPs ------------------------------------------------------------------------------
    def forward_flops(self, batch_size: int, seq_len: int) -> int:
        """FLOPs of one forward pass over ``batch_size`` sequences of ``seq_len`` tokens (source and
        target both ``seq_len`` for an encoder-decoder): every matmul, the attention scores over the
        full T × S grid included, 2 FLOPs per multiply-add (src/models/components/flops.py)."""
        raise NotImplementedError

    def training_flops(self, batch_size: int, seq_len: int, **shape: int) -> int:
        """Forward + backward: 3 × the forward (the backward computes the gradient of each matmul's
        input and of its weight, one matmul each; Kaplan et al. 2020, §2.1)."""
        return 3 * self.forward_flops(batch_size, seq_len, **shape)

    def head_flops(self, n_tokens: int) -> int:
        return linear_flops(self.head, n_tokens)

    # -- generation ---------------------------------------------------------------------------
    def start_decoding(
        self,
        input_ids: Tensor,
        max_new_tokens: int,
        *,
        attention_mask: Tensor | None = None,
        prefix_length: Tensor | None = None,
        use_cache: bool = True,
    ) -> Decoding:
        """The prompt prepared for ``decode_step`` (see ``src.models.generation.generate``)."""
        raise ValueError(f"a {self.config.family} model cannot generate text")

    def decode_step(self, decoding: Decoding) -> Tensor:
        """One decoding step (with the cache when there is one): the next-token logits [B, V]."""
        raise NotImplementedError

    def new_tokens(self, sequences: Tensor, input_ids: Tensor) -> Tensor:
        """The generated tokens of ``generate``'s output for the prompt ``input_ids``."""
        raise NotImplementedError

    def start_tokens(self, batch: int, device: torch.device) -> Tensor:
        """[B, 1]: the first token of an output that does not repeat its prompt
        (``prompt_is_source``)."""
        raise ValueError(
            f"a {self.config.family} model continues its prompt; it has no start token"
        )

    # -- introspection --------------------------------------------------------------------------
    def attention_probs(
        self,
        input_ids: Tensor,
        *,
        decoder_input_ids: Tensor | None = None,
        prefix_length: Tensor | None = None,
    ) -> list[AttentionProbs]:
        """The probabilities of every attention layer, in forward order (the explicit path)."""
        if decoder_input_ids is not None:
            raise ValueError(
                "decoder_input_ids / target apply to encoder-decoder models; a "
                f"{self.config.family} model reads only input_ids (text)"
            )
        out = self(input_ids, prefix_length=prefix_length, output_attentions=True)
        # a layer whose mixer is not attention (model/mixer) has no map: number the others
        (stack,) = self.stacks().values()
        layers = [i for i, block in enumerate(stack.blocks) if not block.recurrent]
        return [
            AttentionProbs("self", i, p, input_ids, input_ids)
            for i, p in zip(layers, out.attentions, strict=True)
        ]

    def stacks(self) -> dict[str, Stack]:
        """The model's stacks by attribute name (``decoder``; ``encoder`` and ``decoder``)."""
        return {name: m for name, m in self.named_children() if isinstance(m, Stack)}

    @property
    def needs_prefix_length(self) -> bool:
        """Whether the forward needs ``prefix_length`` [B] (a prefix-LM mask)."""
        return any(s.needs_prefix_length for s in self.stacks().values())

    @property
    def max_positions(self) -> int | None:
        """The rows of the smallest learned position table (None: any length is accepted)."""
        rows = [
            s.position.max_positions
            for s in self.stacks().values()
            if s.position.max_positions is not None
        ]
        return min(rows) if rows else None

    @property
    def cache_limit(self) -> int | None:
        """The longest sequence whose KV cache stays exact (None: any): a dynamic-NTK RoPE rotates
        every position by the current length's frequencies past its original length
        (``Position.cache_limit``)."""
        limits = [
            s.position.cache_limit
            for s in self.stacks().values()
            if s.position.cache_limit is not None
        ]
        return min(limits) if limits else None

    def hidden_matrices(self) -> list[nn.Parameter]:
        """The 2-D weights of the hidden layers: every ``nn.Linear`` weight of the attention (self
        and cross) and FFN sublayers in the stacks' blocks, in forward order. What Muon
        orthogonalises (Jordan et al. 2024); the embeddings, the head (and a family's head
        transform), norm gains, biases, position tables and placement scalars are not hidden
        matrices."""
        out: list[nn.Parameter] = []
        for stack in self.stacks().values():
            for block in stack.blocks:
                for _, sublayer in block.sublayers():
                    out += [m.weight for m in sublayer.modules() if isinstance(m, nn.Linear)]
        return out

    def parallel_blocks(self) -> list[nn.Module]:
        """The units a parallel strategy wraps one at a time (FSDP2's ``fully_shard``, activation
        checkpointing, tensor parallelism's plan): every block of every stack, in forward order.
        A family whose layers are not ``Block``s returns its own; an empty list means none."""
        return [block for stack in self.stacks().values() for block in stack.blocks]

    def tensor_parallel_plan(self, tp: int) -> dict[str, Any]:
        """{module path: ParallelStyle} that splits the model over ``tp`` ranks (torchtitan's
        per-model plan; ``parallelize_module`` applies it); a family without one refuses."""
        raise ConfigError(
            f"trainer.tensor_parallel={tp}: the {self.config.family} family has no tensor-parallel "
            "plan (decoder_only has); use trainer.tensor_parallel=1 and shard with trainer=fsdp2"
        )

    def lr_multipliers(self, rule: Rule) -> dict[int, float]:
        """{id(parameter): multiplier of optim.lr} under ``rule`` ("adam", "sgd",
        "muon_match_rms_adamw", "muon_original"; empty: one rate for all): the parametrization's
        per-parameter learning rates, which the optimisers' groups apply."""
        return self.parametrization.lr_multipliers(self, rule)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())  # tied weights counted once

    @property
    def device(self) -> torch.device:
        return self.tok_embed.weight.device
