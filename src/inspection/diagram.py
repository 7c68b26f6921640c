"""Pictures of an architecture: the module tree (rich) and a block diagram (Mermaid).

``model_mermaid(config)`` draws what one block computes, as the usual figure of a
Transformer block: input → norm → attention → add → norm → FFN → add for pre-norm
(GPT-2, Llama), input → attention → add → norm → FFN → add → norm for post-norm (2017,
BERT); the decoder of an encoder-decoder adds a cross-attention sublayer fed by the
encoder output. Where positions enter is drawn too: added to the embeddings (learned,
sinusoidal), rotating Q and K (RoPE), biasing the scores (ALiBi), or nowhere (NoPE).
Paste the output into any Mermaid renderer (GitHub renders ```mermaid blocks).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from rich.tree import Tree
from torch import nn

from src.inspection.params import describe
from src.models.components import FFNS, MASKS, NORMS, PLACEMENTS, POSITIONS, QK_NORMS, SINKS
from src.models.components.attention import MultiHeadAttention
from src.models.components.ffn import NoFFN
from src.models.config import ModelConfig
from src.models.families import FAMILIES
from src.models.mixers.base import MIXERS
from src.models.mixers.layers import is_recurrent, mixer_nodes

# -- module tree ----------------------------------------------------------------------------


def _params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _node_label(name: str, path: str, module: nn.Module, tied: dict[str, str]) -> str:
    cls = type(module).__name__
    reg = getattr(type(module), "registry_name", None)
    label = f"[bold]{name}[/]: {cls}" + (f" [magenta]\\[{reg}][/]" if reg else "")
    if isinstance(module, MultiHeadAttention):
        extra = f"{module.n_head} heads × {module.head_dim}"
        if module.n_kv_head != module.n_head:
            extra += f", {module.n_kv_head} KV heads"
        if module.q_norm is not None:
            extra += ", QK-norm"
        label += f" {extra}" + (" (cross)" if module.cross else "")
    elif isinstance(module, (nn.Linear, nn.Embedding)):
        label += f" {describe(module)}"
    n = _params(module)
    if n:
        label += f" [dim]{n:,}[/]"
    for pname, _ in module.named_parameters(prefix=path, recurse=False):
        if pname in tied:
            label += f" [yellow](tied to {tied[pname].rsplit('.', 1)[0]})[/]"
            break
    return label


def component_tree(model: nn.Module, title: str | None = None) -> Tree:
    """The module tree; a list of identical blocks is drawn once as ``blocks.0–11 (×12)``.

    Dropout modules are left out (no parameters, nothing to see); a weight shared with an
    earlier module (the tied LM head) is marked ``(tied to …)``.
    """
    first: dict[int, str] = {}
    tied: dict[str, str] = {}  # parameter name -> the name it shares its tensor with
    for pname, p in model.named_parameters(remove_duplicate=False):
        if id(p) in first:
            tied[pname] = first[id(p)]
        else:
            first[id(p)] = pname
    root = Tree(title or f"[bold]{type(model).__name__}[/]")
    root.label = f"{root.label} [dim]{_params(model):,} parameters[/]"

    def add(parent: Tree, module: nn.Module, path: str) -> None:
        for name, child in module.named_children():
            child_path = f"{path}.{name}" if path else name
            if isinstance(child, nn.Dropout):
                continue
            if isinstance(child, nn.ModuleList) and len(child) > 1:
                shapes = [(n, tuple(p.shape)) for n, p in child[0].named_parameters()]
                if all(
                    [(n, tuple(p.shape)) for n, p in c.named_parameters()] == shapes for c in child
                ):
                    label = _node_label(
                        f"{name}.0–{len(child) - 1} (×{len(child)})",
                        f"{child_path}.0",
                        child[0],
                        tied,
                    )
                    add(parent.add(label), child[0], f"{child_path}.0")
                    continue
            add(parent.add(_node_label(name, child_path, child, tied)), child, child_path)

    add(root, model, "")
    return root


# -- Mermaid block diagram -------------------------------------------------------------------


@dataclass
class _Flow:
    lines: list[str]

    def node(self, node_id: str, text: str, shape: str = "box") -> str:
        open_, close = {
            "box": ('["', '"]'),
            "add": ('(("', '"))'),
            "io": ('(["', '"])'),
            "round": ('("', '")'),
        }[shape]
        self.lines.append(f"    {node_id}{open_}{text}{close}")
        return node_id

    def edge(self, a: str, b: str, label: str | None = None, dotted: bool = False) -> None:
        arrow = "-.->" if dotted else "-->"
        self.lines.append(f"    {a} {arrow}{f'|{label}|' if label else ''} {b}")


def _norm_name(cfg: ModelConfig) -> str:
    return getattr(NORMS.get(cfg.norm["name"]), "display", cfg.norm["name"])


def _ffn_text(cfg: ModelConfig) -> str:
    cls = FFNS.get(cfg.ffn["name"])
    formula = getattr(cls, "formula", None)
    return (
        f"FFN: {getattr(cls, 'display', cfg.ffn['name'])}<br/>"
        + (f"{formula}<br/>" if formula else "")
        + f"{cfg.d_model} → {cfg.d_ff} → {cfg.d_model}"
    )


def _heads_text(cfg: ModelConfig) -> str:
    text = f"{cfg.n_head} heads × {cfg.head_dim}"
    if cfg.kv_heads != cfg.n_head:
        text += (
            f", {cfg.kv_heads} KV head"
            + ("s" if cfg.kv_heads > 1 else "")
            + (" (MQA)" if cfg.kv_heads == 1 else " (GQA)")
        )
    return text


def _attention_extras(cfg: ModelConfig) -> str:
    """QK-norm, a sink and a score scale other than 1/√d_head, as lines of an attention node."""
    qk = QK_NORMS.build(cfg.qk_norm, **cfg.component_context()).describe()
    sink = SINKS.build(cfg.sinks).describe()
    lines = (
        ([qk] if qk else [])
        + ([sink] if sink else [])
        + (
            [f"scores × {cfg.attn_scale:g} (not 1/√{cfg.head_dim})"]
            if cfg.attn_scale is not None
            else []
        )
    )
    return "".join(f"<br/>{line}" for line in lines)


def _position_text(cfg: ModelConfig) -> str | None:
    """What the position does inside attention, with a RoPE scaling when there is one."""
    text = POSITIONS.get(cfg.position["name"]).in_attention
    scaling = cfg.position.get("scaling")
    if text and scaling:
        text += f"<br/>scaling: {scaling['name']} ×{scaling.get('factor', 1):g}"
    return text


def _mixer_text(cfg: ModelConfig, n_layer: int) -> tuple[str | None, bool]:
    """The token mixer of a causal stack's layers (``model/mixer``, ``model.layer_mixers``)
    (None when every layer is attention), and whether no layer is attention."""
    nodes = mixer_nodes(cfg, n_layer)
    if not any(is_recurrent(n) for n in nodes):
        return None, False
    with torch.device("meta"):  # built for its display line only
        shown = [
            MIXERS.build(n, **cfg.component_context()).display if is_recurrent(n) else "attention"
            for n in nodes[: len(cfg.layer_mixers or [None])]
        ]
    only = all(is_recurrent(n) for n in nodes)
    if len(shown) == 1:
        return f"token mixer: {shown[0]}", only
    return f"token mixer per layer, cycled:<br/>{' → '.join(shown)}", only


def _block(
    flow: _Flow,
    p: str,
    cfg: ModelConfig,
    x: str,
    attn_kind: str,
    cross: bool,
    memory: str | None,
    mixer: tuple[str | None, bool] = (None, False),
) -> str:
    """Draw one block starting from node ``x`` with the placement's own ``drawing``; return the
    block's output node. ``p`` prefixes ids; ``mixer``: the token mixer's text where the layers
    are not all attention (``_mixer_text``)."""
    in_attn = _position_text(cfg)
    extras = _attention_extras(cfg)
    attention = (
        f"{attn_kind} self-attention<br/>{_heads_text(cfg)}"
        + (f"<br/>{in_attn}" if in_attn else "")
        + extras
    )
    text, only = mixer
    sublayers = [
        ("attn", text if only else attention if text is None else f"{text}<br/>{attention}")
    ]
    if cross:
        sublayers.append(
            (
                "cross",
                f"cross-attention<br/>Q ← decoder, K/V ← encoder<br/>{_heads_text(cfg)}{extras}",
            )
        )
    if FFNS.get(cfg.ffn["name"]) is not NoFFN:  # model/ffn=none: the block has no FFN sublayer
        sublayers.append(("ffn", _ffn_text(cfg)))
    placement = PLACEMENTS.get(cfg.norm_placement)
    steps = placement.drawing
    norm = _norm_name(cfg)
    cur = x
    for i, (key, text) in enumerate(sublayers, start=1):
        start, n_norms = cur, 0
        for step in steps:
            if step == "add":
                node = flow.node(f"{p}_add{i}", "+", "add")
                flow.edge(cur, node)
                flow.edge(start, node, placement.residual, dotted=True)
            elif step == "sublayer":
                node = flow.node(f"{p}_{key}", text)
                flow.edge(cur, node)
                if key == "cross" and memory is not None:
                    flow.edge(memory, node, "K, V")
            elif step == "norm":
                n_norms += 1
                node = flow.node(f"{p}_norm{i}" + ("" if n_norms < 2 else "b"), norm)
                flow.edge(cur, node)
            else:  # a placement's own step (a gate, a scale …), drawn under its name
                node = flow.node(f"{p}_step{steps.index(step)}_{i}", step)
                flow.edge(cur, node)
            cur = node
    return cur


def _embeddings(flow: _Flow, p: str, cfg: ModelConfig, ids_text: str, shared: bool) -> str:
    """token ids → token embedding (→ + positions) (→ embedding norm); return the last node."""
    ids = flow.node(f"{p}_ids", ids_text, "io")
    scale = f"<br/>× √{cfg.d_model}" if cfg.scale_embeddings else ""
    tok = flow.node(
        f"{p}_tok",
        f"token embedding{' (shared)' if shared else ''}<br/>{cfg.vocab_size} × "
        f"{cfg.d_model}{scale}",
    )
    flow.edge(ids, tok)
    cur = tok
    what = POSITIONS.get(cfg.position["name"]).in_embeddings(
        cfg.position, cfg.d_model, cfg.max_seq_len
    )
    if what is not None:
        pos = flow.node(f"{p}_pos", what)
        add = flow.node(f"{p}_posadd", "+", "add")
        flow.edge(tok, add)
        flow.edge(pos, add)
        cur = add
    if cfg.embedding_norm:
        n = flow.node(f"{p}_embnorm", f"embedding {_norm_name(cfg)}")
        flow.edge(cur, n)
        cur = n
    return cur


def _stack(
    flow: _Flow,
    p: str,
    cfg: ModelConfig,
    x: str,
    n_layer: int,
    title: str,
    attn_kind: str,
    cross: bool = False,
    memory: str | None = None,
) -> str:
    """A subgraph with one block (×n_layer), then the final norm when the placement has one."""
    placement = PLACEMENTS.get(cfg.norm_placement)
    flow.lines.append(
        f'    subgraph {p}["{title} block × {n_layer} ({placement.title or cfg.norm_placement})"]'
    )
    flow.lines.append("    direction TB")
    block_in = flow.node(f"{p}_in", "x [B, T, C]" if not cross else "y [B, T, C]", "round")
    mixer = _mixer_text(cfg, n_layer) if title == "decoder" else (None, False)  # causal stacks
    out = _block(flow, p, cfg, block_in, attn_kind, cross, memory, mixer)
    flow.lines.append("    end")
    flow.edge(x, block_in)
    if placement.final_norm:
        final = flow.node(f"{p}_final", f"final {_norm_name(cfg)}")
        flow.edge(out, final)
        out = final
    return out


def model_mermaid(cfg: ModelConfig) -> str:
    """A Mermaid flowchart of the model: embeddings, one block per stack (× N), head; the stacks
    as the family lays them out (``TransformerModel.layout``)."""
    flow = _Flow(["flowchart TD"])
    tied = " (tied to token embedding)" if cfg.tie_embeddings else ""
    layouts = FAMILIES.get(cfg.family).layout(cfg)
    ids_prefix = {1: ["in"], 2: ["src", "tgt"]}.get(len(layouts), [s.name[:3] for s in layouts])
    memory: str | None = None
    out = ""
    for k, (stack, prefix) in enumerate(zip(layouts, ids_prefix)):
        x = _embeddings(flow, prefix, cfg, stack.inputs, shared=len(layouts) > 1)
        mask = MASKS.get(stack.mask)
        out = _stack(
            flow,
            stack.name[:3],
            cfg,
            x,
            stack.n_layer,
            stack.name,
            getattr(mask, "display", "") or stack.mask,
            cross=stack.cross,
            memory=memory,
        )
        if k < len(layouts) - 1:  # the next stack reads this one's output
            memory = flow.node("memory", "encoder output (memory)<br/>[B, S, C]", "io")
            flow.edge(out, memory)
        if stack.then:
            then = flow.node("transform", stack.then.format(norm=_norm_name(cfg)))
            flow.edge(out, then)
            out = then
    scaled = "<br/>input × d_model^-0.5" if cfg.scale_head else ""
    head = flow.node("head", f"LM head<br/>{cfg.d_model} → {cfg.vocab_size}{tied}{scaled}")
    logits = flow.node("logits", "logits [B, T, V]", "io")
    flow.edge(out, head)
    flow.edge(head, logits)
    return "\n".join(flow.lines) + "\n"
