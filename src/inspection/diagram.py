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

from rich.tree import Tree
from torch import nn

from src.inspection.params import describe
from src.models.components.attention import MultiHeadAttention
from src.models.config import ModelConfig

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
                if all([(n, tuple(p.shape)) for n, p in c.named_parameters()] == shapes for c in child):
                    label = _node_label(f"{name}.0–{len(child) - 1} (×{len(child)})", f"{child_path}.0", child[0], tied)
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
        open_, close = {"box": ('["', '"]'), "add": ('(("', '"))'), "io": ('(["', '"])'), "round": ('("', '")')}[shape]
        self.lines.append(f"    {node_id}{open_}{text}{close}")
        return node_id

    def edge(self, a: str, b: str, label: str | None = None, dotted: bool = False) -> None:
        arrow = "-.->" if dotted else "-->"
        self.lines.append(f"    {a} {arrow}{f'|{label}|' if label else ''} {b}")


def _norm_name(cfg: ModelConfig) -> str:
    return {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm"}.get(cfg.norm.get("name", ""), str(cfg.norm.get("name")))


def _ffn_text(cfg: ModelConfig) -> str:
    name = cfg.ffn.get("name", "")
    if name == "swiglu":
        return f"FFN: SwiGLU<br/>down(silu(gate·x) ⊙ up·x)<br/>{cfg.d_model} → {cfg.d_ff} → {cfg.d_model}"
    act = {"gelu": "GELU", "relu": "ReLU", "silu": "SiLU"}.get(name, name)
    return f"FFN: {act}<br/>{cfg.d_model} → {cfg.d_ff} → {cfg.d_model}"


def _heads_text(cfg: ModelConfig) -> str:
    text = f"{cfg.n_head} heads × {cfg.head_dim}"
    if cfg.kv_heads != cfg.n_head:
        text += f", {cfg.kv_heads} KV head" + ("s" if cfg.kv_heads > 1 else "") + (" (MQA)" if cfg.kv_heads == 1 else " (GQA)")
    return text


def _position_in_attention(cfg: ModelConfig) -> str:
    name = cfg.position.get("name")
    return {
        "rope": "<br/>RoPE rotates Q, K",
        "alibi": "<br/>ALiBi bias on scores",
        "none": "<br/>no positions (NoPE)",
    }.get(str(name), "")


def _block(flow: _Flow, p: str, cfg: ModelConfig, x: str, attn_kind: str, cross: bool, memory: str | None) -> str:
    """Draw one block starting from node ``x``; return the block's output node. ``p`` prefixes ids."""
    sublayers = [("attn", f"{attn_kind} self-attention<br/>{_heads_text(cfg)}{_position_in_attention(cfg)}")]
    if cross:
        sublayers.append(("cross", f"cross-attention<br/>Q ← decoder, K/V ← encoder<br/>{_heads_text(cfg)}"))
    sublayers.append(("ffn", _ffn_text(cfg)))
    norm = _norm_name(cfg)
    cur = x
    for i, (key, text) in enumerate(sublayers, start=1):
        sub = flow.node(f"{p}_{key}", text)
        add = flow.node(f"{p}_add{i}", "+", "add")
        if cfg.norm_placement == "pre":  # x + f(norm(x))
            n = flow.node(f"{p}_norm{i}", norm)
            flow.edge(cur, n)
            flow.edge(n, sub)
            flow.edge(sub, add)
            flow.edge(cur, add, "residual", dotted=True)
            cur = add
        else:  # norm(x + f(x))
            n = flow.node(f"{p}_norm{i}", norm)
            flow.edge(cur, sub)
            flow.edge(sub, add)
            flow.edge(cur, add, "residual", dotted=True)
            flow.edge(add, n)
            cur = n
        if key == "cross" and memory is not None:
            flow.edge(memory, sub, "K, V")
    return cur


def _embeddings(flow: _Flow, p: str, cfg: ModelConfig, ids_text: str) -> str:
    """token ids → token embedding (→ + positions) (→ embedding norm); return the last node."""
    ids = flow.node(f"{p}_ids", ids_text, "io")
    scale = f"<br/>× √{cfg.d_model}" if cfg.scale_embeddings else ""
    shared = " (shared)" if cfg.family == "encoder_decoder" else ""
    tok = flow.node(f"{p}_tok", f"token embedding{shared}<br/>{cfg.vocab_size} × {cfg.d_model}{scale}")
    flow.edge(ids, tok)
    cur = tok
    name = cfg.position.get("name")
    if name in ("learned", "sinusoidal"):
        what = f"learned positions<br/>{cfg.max_seq_len} × {cfg.d_model}" if name == "learned" else (
            f"sinusoidal positions<br/>{cfg.position.get('layout', 'interleaved')}, fixed"
        )
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


def _stack(flow: _Flow, p: str, cfg: ModelConfig, x: str, n_layer: int, title: str, attn_kind: str,
           cross: bool = False, memory: str | None = None) -> str:
    """A subgraph with one block (×n_layer), then the final norm for pre-norm stacks."""
    flow.lines.append(f'    subgraph {p}["{title} block × {n_layer} ({cfg.norm_placement}-norm)"]')
    flow.lines.append("    direction TB")
    block_in = flow.node(f"{p}_in", "x [B, T, C]" if not cross else "y [B, T, C]", "round")
    out = _block(flow, p, cfg, block_in, attn_kind, cross, memory)
    flow.lines.append("    end")
    flow.edge(x, block_in)
    if cfg.norm_placement == "pre":
        final = flow.node(f"{p}_final", f"final {_norm_name(cfg)}")
        flow.edge(out, final)
        out = final
    return out


def _mask_kind(cfg: ModelConfig, default: str) -> str:
    name = (cfg.mask or {}).get("name", default)
    return {"causal": "causal", "bidirectional": "bidirectional", "prefix_lm": "prefix-LM"}.get(name, name)


def model_mermaid(cfg: ModelConfig) -> str:
    """A Mermaid flowchart of the model: embeddings, one block per stack (× N), head."""
    flow = _Flow(["flowchart TD"])
    tied = " (tied to token embedding)" if cfg.tie_embeddings else ""
    if cfg.family == "encoder_decoder":
        src = _embeddings(flow, "src", cfg, "source ids [B, S]")
        enc = _stack(flow, "enc", cfg, src, cfg.encoder_layers, "encoder", "bidirectional")
        memory = flow.node("memory", "encoder output (memory)<br/>[B, S, C]", "io")
        flow.edge(enc, memory)
        tgt = _embeddings(flow, "tgt", cfg, "target ids [B, T]")
        out = _stack(flow, "dec", cfg, tgt, cfg.decoder_layers, "decoder", "causal", cross=True, memory=memory)
    elif cfg.family == "encoder_only":
        x = _embeddings(flow, "in", cfg, "token ids [B, T]")
        out = _stack(flow, "enc", cfg, x, cfg.n_layer, "encoder", _mask_kind(cfg, "bidirectional"))
        transform = flow.node("transform", f"MLM transform<br/>dense, GELU, {_norm_name(cfg)}")
        flow.edge(out, transform)
        out = transform
    else:
        x = _embeddings(flow, "in", cfg, "token ids [B, T]")
        out = _stack(flow, "dec", cfg, x, cfg.n_layer, "decoder", _mask_kind(cfg, "causal"))
    head = flow.node("head", f"LM head<br/>{cfg.d_model} → {cfg.vocab_size}{tied}")
    logits = flow.node("logits", "logits [B, T, V]", "io")
    flow.edge(out, head)
    flow.edge(head, logits)
    return "\n".join(flow.lines) + "\n"
