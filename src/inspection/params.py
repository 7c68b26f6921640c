"""Where a model's parameters, FLOPs and attention memory go, by component.

Everything here reads a built model (build it on the meta device to inspect GPT-2 xl
without allocating memory: ``with torch.device("meta"): build_model(cfg)``).

* ``parameter_table(model)`` — rows by component: token embedding, positions, per block
  attention / FFN / norms, final norm, head (marked when tied). Identical consecutive
  blocks are shown once with ``×N``.
* ``flops_per_token(model, T)`` — FLOPs per token at context T from the model's own count
  (``model.forward_flops``: every matmul, attention scores included), forward and training.
* ``attention_memory(model, T, dtype)`` — bytes the materialised attention probabilities
  [B, H, T, S] take (what the explicit path and ``output_attentions`` allocate, and what
  flash attention avoids).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from rich import box
from rich.table import Table
from torch import nn

from src.models.components.attention import MultiHeadAttention
from src.models.components.block import Block, Stack
from src.models.components.positions import Position
from src.models.components.residual import Residual
from src.models.families import TransformerModel
from src.models.mixers.base import SequenceMixer

DTYPE_BYTES: dict[str, int] = {
    "fp64": 8, "float64": 8, "double": 8,
    "fp32": 4, "float32": 4, "float": 4,
    "tf32": 4,
    "bf16": 2, "bfloat16": 2,
    "fp16": 2, "float16": 2, "half": 2,
    "fp8": 1, "float8": 1,
}  # fmt: skip


def dtype_bytes(dtype: str | torch.dtype) -> int:
    """Bytes per element of ``dtype`` (``"bf16"``, ``"float32"``, ``torch.float16`` …)."""
    if isinstance(dtype, torch.dtype):
        return torch.empty((), dtype=dtype).element_size()
    key = str(dtype).lower().removeprefix("torch.")
    if key not in DTYPE_BYTES:
        raise ValueError(f"dtype '{dtype}' is not known; use one of: {', '.join(DTYPE_BYTES)}")
    return DTYPE_BYTES[key]


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KiB', 25165824 -> '24 MiB' (binary units, at most one decimal)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            text = f"{n:.1f}".removesuffix(".0")
            return f"{text} {unit}"
        n /= 1024
    raise RuntimeError("unreachable")


def format_count(n: float) -> str:
    """124439808 -> '124.4M'."""
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            return f"{n / div:.1f}{suffix}"
    return str(int(n))


# -- parameters by component ------------------------------------------------------------


@dataclass
class ParamRow:
    """One line of the parameter table.

    ``kind``: ``component`` (a module), ``group`` (a run of identical blocks, with their
    summed parameters; its components follow at ``level`` 1), ``subtotal`` (one block of
    the group) or ``total``. ``params`` counts each
    tensor once: a weight tied to an earlier one (the LM head) counts 0 and says so in ``tied_to``.
    """

    component: str
    module: str
    params: int
    shape: str = ""
    kind: str = "component"
    level: int = 0
    tied_to: str | None = None


@dataclass
class ParamTable:
    rows: list[ParamRow]
    total: int  # unique parameters (tied weights once) = model.num_parameters()
    position_params: int  # learned position tables (nanoGPT's get_num_params subtracts these)
    tied: dict[str, str] = field(default_factory=dict)  # parameter name -> the name it is tied to

    def find(self, component: str) -> ParamRow:
        """The first row whose label starts with ``component`` (for tests and scripts)."""
        for row in self.rows:
            if row.component.startswith(component):
                return row
        raise KeyError(f"no row '{component}'; rows: {[r.component for r in self.rows]}")


def registry_label(module: nn.Module) -> str:
    """The registered name of a component class (``rope``, ``swiglu``), else the class name."""
    return getattr(type(module), "registry_name", type(module).__name__)


def describe(module: nn.Module) -> str:
    """A short shape summary: 'qkv 768→2304, out 768→768', '50257×768', '768'."""
    if isinstance(module, nn.Embedding):
        return f"{module.num_embeddings}×{module.embedding_dim}"
    if isinstance(module, nn.Linear):
        return f"{module.in_features}→{module.out_features}"
    parts = []
    for name, child in module.named_children():
        if isinstance(child, (nn.Linear, nn.Embedding)):
            parts.append(f"{name} {describe(child)}")
    if parts:
        return ", ".join(parts)
    own = list(module.parameters(recurse=False))
    if own:
        return "×".join(str(s) for s in own[0].shape)
    if isinstance(module, Position) and not any(True for _ in module.parameters()):
        return "computed, no parameters"
    return ""


def component_label(attr: str, module: nn.Module) -> str:
    """Human name of a component from its attribute name and class."""
    if isinstance(module, MultiHeadAttention):
        kind = "cross-attention" if module.cross else "attention"
        heads = f"{module.n_head} heads × {module.head_dim}"
        if module.n_kv_head != module.n_head:
            heads += f", {module.n_kv_head} KV head" + ("s" if module.n_kv_head > 1 else "")
        if module.q_norm is not None:
            heads += ", QK-norm"
        return f"{kind} ({heads})"
    if isinstance(module, SequenceMixer):  # model/mixer in place of the attention
        return f"mixer ({module.display})"
    if isinstance(module, Position):
        return f"positions ({registry_label(module)})"
    if isinstance(module, Residual):  # a placement's own parameters (ReZero's gate α)
        return f"{attr.removesuffix('_res')} residual ({registry_label(module)})"
    labels = {
        "tok_embed": "token embedding",
        "ffn": f"FFN ({registry_label(module)})",
        "final_norm": f"final norm ({registry_label(module)})",
        "embed_norm": f"embedding norm ({registry_label(module)})",
        "transform": "MLM transform (dense, GELU, norm)",
        "head": "LM head",
    }
    if attr in labels:
        return labels[attr]
    if attr.endswith("norm"):
        return f"norm ({registry_label(module)})"
    return f"{attr} ({type(module).__name__})"


class _Counter:
    """Counts parameters by module path, each tensor once, remembering ties."""

    def __init__(self, model: nn.Module) -> None:
        self.first: dict[int, str] = {}
        self.tied: dict[str, str] = {}
        for name, p in model.named_parameters(remove_duplicate=False):
            if id(p) in self.first:
                self.tied[name] = self.first[id(p)]
            else:
                self.first[id(p)] = name

    def count(self, module: nn.Module, path: str) -> tuple[int, str | None]:
        """(parameters owned by ``module`` at ``path``, the module it is tied to, if any)."""
        own, tied_to = 0, None
        for name, p in module.named_parameters(prefix=path, remove_duplicate=False):
            if self.first[id(p)] == name:
                own += p.numel()
            else:
                tied_to = self.first[id(p)].rsplit(".", 1)[0]
        return own, tied_to


def _signature(block: nn.Module) -> list[tuple[str, tuple[int, ...]]]:
    return [(n, tuple(p.shape)) for n, p in block.named_parameters()]


def _block_rows(block: Block, path: str, counter: _Counter, level: int) -> list[ParamRow]:
    """attention, cross-attention, FFN, norms (summed) and the block total."""
    rows: list[ParamRow] = []
    norm_params, norm_names, norm_kind = 0, [], ""
    for attr, child in block.named_children():
        n, tied_to = counter.count(child, f"{path}.{attr}")
        if attr.endswith("norm"):
            norm_params += n
            norm_names.append(attr)
            norm_kind = registry_label(child)
            continue
        # a placement's own norms (sandwich) count with the block's norms
        if isinstance(child, Residual):
            for sub, norm in (
                (f"{attr}.{name}", m) for name, m in child.named_children() if m in child.norms()
            ):
                norm_params += counter.count(norm, f"{path}.{sub}")[0]
                norm_names.append(sub)
                norm_kind = registry_label(norm)
            n -= sum(p.numel() for m in child.norms() for p in m.parameters())
        if isinstance(child, (Residual, nn.Dropout)) and not n:
            # a placement without parameters of its own (pre, post, sandwich) and dropout: nothing
            # to count
            continue
        rows.append(
            ParamRow(
                component_label(attr, child),
                f".{attr}",
                n,
                describe(child),
                level=level,
                tied_to=tied_to,
            )
        )
    if norm_names:
        rows.append(
            ParamRow(
                f"norms ({norm_kind} ×{len(norm_names)})",
                ", ".join(f".{a}" for a in norm_names),
                norm_params,
                level=level,
            )
        )
    return rows


def _stack_rows(stack: Stack, path: str, counter: _Counter, expand_blocks: bool) -> list[ParamRow]:
    rows: list[ParamRow] = []
    for attr, child in stack.named_children():
        if attr == "blocks":
            blocks = list(child)
            i = 0
            while i < len(blocks):  # groups of consecutive identical blocks
                j = i + 1
                while (
                    not expand_blocks
                    and j < len(blocks)
                    and _signature(blocks[j]) == _signature(blocks[i])
                ):
                    j += 1
                count = j - i
                group_params = sum(
                    counter.count(blocks[k], f"{path}.blocks.{k}")[0] for k in range(i, j)
                )
                label = (
                    f"{path} block {i}" if count == 1 else f"{path} blocks {i}–{j - 1} (×{count})"
                )
                block_path = (
                    f"{path}.blocks.{i}" if count == 1 else f"{path}.blocks.{{{i}..{j - 1}}}"
                )
                rows.append(ParamRow(label, block_path, group_params, kind="group"))
                rows.extend(_block_rows(blocks[i], f"{path}.blocks.{i}", counter, level=1))
                each, _ = counter.count(blocks[i], f"{path}.blocks.{i}")
                rows.append(
                    ParamRow(
                        "block (each)" if count > 1 else "block", "", each, kind="subtotal", level=1
                    )
                )
                i = j
        elif isinstance(child, nn.Dropout):
            continue
        else:
            n, tied_to = counter.count(child, f"{path}.{attr}")
            rows.append(
                ParamRow(
                    component_label(attr, child),
                    f"{path}.{attr}",
                    n,
                    describe(child),
                    tied_to=tied_to,
                )
            )
    return rows


def parameter_table(model: nn.Module, expand_blocks: bool = False) -> ParamTable:
    """Rows by component, in forward order; ``expand_blocks`` lists every block separately."""
    counter = _Counter(model)
    rows: list[ParamRow] = []
    for attr, child in model.named_children():
        if isinstance(child, Stack):
            rows.extend(_stack_rows(child, attr, counter, expand_blocks))
        elif isinstance(child, nn.Dropout):
            continue
        else:
            n, tied_to = counter.count(child, attr)
            rows.append(
                ParamRow(component_label(attr, child), attr, n, describe(child), tied_to=tied_to)
            )
    total = sum(p.numel() for p in model.parameters())
    counted = sum(r.params for r in rows if r.level == 0 and r.kind in ("component", "group"))
    if counted != total:  # a module the table does not know about: fail loudly rather than mislead
        raise RuntimeError(
            f"parameter table sums to {counted:,} but the model has {total:,} parameters"
        )
    rows.append(ParamRow("total", "", total, kind="total"))
    return ParamTable(
        rows=rows, total=total, position_params=position_parameters(model), tied=counter.tied
    )


def position_parameters(model: nn.Module) -> int:
    """Parameters of absolute position tables (0 for sinusoidal, RoPE, ALiBi, none)."""
    return sum(
        p.numel() for m in model.modules() if isinstance(m, Position) for p in m.parameters()
    )


# -- FLOPs ------------------------------------------------------------------------------


@dataclass
class FlopsEstimate:
    """FLOPs per token at context length ``seq_len``, from ``model.forward_flops`` (one count, owned
    by the model; checked against ``torch.utils.flop_counter`` in tests/models/test_flops.py).

    Per token the forward count is ``a + b·T``: ``a`` from the weight matmuls, ``b·T`` from the
    attention scores (Q·Kᵀ and P·V over the whole T × T grid), read off the count at T and 2T.
    """

    seq_len: int  # T
    forward: int  # forward FLOPs per token
    attention: int  # of which the attention scores
    training: int  # forward + backward per token (model.training_flops: 3 × forward)

    @property
    def weights(self) -> int:
        """Forward FLOPs per token of the weight matmuls (2 per multiply-add, every linear and the
        head)."""
        return self.forward - self.attention


def flops_per_token(model: TransformerModel, seq_len: int) -> FlopsEstimate:
    """The model's FLOPs per token at context length ``seq_len`` (see ``FlopsEstimate``)."""
    at_t = model.forward_flops(1, seq_len) // seq_len
    at_2t = model.forward_flops(1, 2 * seq_len) // (2 * seq_len)
    return FlopsEstimate(
        seq_len=seq_len,
        forward=at_t,
        attention=at_2t - at_t,
        training=model.training_flops(1, seq_len) // seq_len,
    )


def attention_modules(model: nn.Module) -> list[MultiHeadAttention]:
    return [m for m in model.modules() if isinstance(m, MultiHeadAttention)]


# -- attention memory -------------------------------------------------------------------


@dataclass
class AttentionMemory:
    """Bytes of the attention probabilities [B, H, T, S] one layer materialises, and all layers."""

    batch_size: int
    n_head: int
    seq_len: int
    bytes_per_element: int
    n_layers: int  # attention modules (self and cross)

    @property
    def per_layer(self) -> int:
        return self.batch_size * self.n_head * self.seq_len * self.seq_len * self.bytes_per_element

    @property
    def total(self) -> int:
        return self.per_layer * self.n_layers


def attention_memory(
    model: nn.Module, seq_len: int, dtype: str | torch.dtype = "bf16", batch_size: int = 1
) -> AttentionMemory:
    """B × H × T × T × bytes per layer (cross-attention is counted with S = T).

    GPT-2 small at T = 1024 in bf16: 1 × 12 × 1024 × 1024 × 2 B = 24 MiB per layer, 288 MiB
    for its 12 layers — memory the flash / memory-efficient SDPA kernels never allocate.
    """
    attn = attention_modules(model)
    if not attn:  # every layer a recurrent mixer (model/mixer): no probabilities to hold
        return AttentionMemory(batch_size, 0, seq_len, dtype_bytes(dtype), 0)
    return AttentionMemory(batch_size, attn[0].n_head, seq_len, dtype_bytes(dtype), len(attn))


# -- rendering (rich) -------------------------------------------------------------------


def render_parameter_table(table: ParamTable, title: str | None = None) -> Table:
    """The table as a rich ``Table``: component, module, weights, parameters, share of total."""
    out = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
    out.add_column("component", no_wrap=True)
    out.add_column("module", style="cyan")
    out.add_column("weights", style="dim")
    out.add_column("parameters", justify="right", no_wrap=True)
    out.add_column("share", justify="right", style="dim", no_wrap=True)
    for row in table.rows:
        share = f"{100 * row.params / table.total:.1f}%" if row.level == 0 and table.total else ""
        label = "  " * row.level + row.component
        if row.tied_to is not None:
            label += (
                f" (tied to {row.tied_to})"
                if row.params == 0
                else f" (weight tied to {row.tied_to})"
            )
        style = {"group": "bold", "subtotal": "italic", "total": "bold"}.get(row.kind)
        if row.kind == "total":
            out.add_section()
        out.add_row(label, row.module, row.shape, f"{row.params:,}", share, style=style)
    return out


def render_summary(total: int, flops: FlopsEstimate, memory: AttentionMemory, dtype: str) -> Table:
    """Totals: parameters, FLOPs per token (with the formula's terms), attention-weight memory."""
    out = Table(box=None, show_header=False, pad_edge=False)
    out.add_column(style="bold")
    out.add_column()
    out.add_row("total parameters", f"{total:,} ({format_count(total)})")
    out.add_row(
        "FLOPs per token",
        f"{flops.training:,} ≈ {flops.training / 1e9:.3g} GFLOP training (forward + backward = 3 × "
        f"forward {flops.forward:,}) at T = {flops.seq_len}",
    )
    out.add_row(
        "",
        f"forward = weight matmuls {flops.weights:,} + attention scores {flops.attention:,} (Q·Kᵀ "
        "and P·V over T × T); 2 FLOPs per multiply-add, model.forward_flops",
    )
    out.add_row(
        "attention weights",
        f"{format_bytes(memory.per_layer)} per layer, {format_bytes(memory.total)} for "
        f"{memory.n_layers} attention layers (B={memory.batch_size} × H={memory.n_head} × "
        f"T={memory.seq_len} × T={memory.seq_len} × {memory.bytes_per_element} bytes, {dtype}) if "
        "materialised",
    )
    return out
