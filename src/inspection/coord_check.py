"""``python -m src.inspect coord_check``: the coordinate check of a parametrization.

::

    python -m src.inspect coord_check                                   # tiny, sp and mup, 4 widths
    python -m src.inspect coord_check model=llama_small widths=[64,128,256,512] steps=5

Yang et al. 2022 (Tensor Programs V, Fig. 1 and §7.1; the ``mup`` package's ``get_coord_data``):
train the same model at several widths for a few steps, all from the same batch and seed, and plot
the mean |x| of each kind of activation against width, one curve per step (the CSV also holds
mean |x_t − x_0|, the change training made, which TP5's Fig. 1 plots). Under μP the curves stay
flat; under the standard parametrization they grow with width (the output logits included). The
check is a number, not a picture: the least-squares slope of log mean |x| on log width, per step
and kind, averaged over the second half of the steps (``CoordCheck.late_slopes``), which the test
asserts. The task is one fixed batch of random tokens that only attention can fit (next token,
copy, or left neighbour: ``_loss_and_logits``).

At the small widths a CPU test affords (32 to 256) μP's slopes are near 0 but not all at 0: the
random parts of the attention scores (q·k₀ summed over D, ~1/√D) still show, and a bidirectional
encoder's attention logits shrink with a slope of about −0.6 (measured; docs/training.md, μP).
Nothing grows: SP's hidden activations grow with slopes of 1.5 to 2.5 and its logits 0.5 to 1.

Kinds of activation (the mean over every layer of that kind):

* ``embedding``     the token embeddings (``tok_embed``, the family's input scale included);
* ``attn_logits``   the attention scores scale · q·kᵀ of every attention (self and cross);
* ``attn_out``      each attention's output projection;
* ``ffn_out``       each feed-forward sublayer's output;
* ``output_logits`` the logits (``TransformerModel.logits``).

The width axis scales d_model, d_ff (and d_head when set) together; heads and layers stay; under
``mup`` the smallest width is the base (``model.parametrization.base_d_model``).
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig
from torch import Tensor, nn

from src.errors import ConfigError
from src.files import atomic_path, atomic_write
from src.models import ModelConfig, build_model
from src.models.components.attention import MultiHeadAttention
from src.models.components.block import Block
from src.models.families import TransformerModel
from src.optim.base import optimizer_config
from src.plain import to_plain

KINDS = ("embedding", "attn_logits", "attn_out", "ffn_out", "output_logits")
PARAMETRIZATIONS = ("sp", "mup")


@dataclass
class CoordCheck:
    """Mean |activation| per (parametrization, width, step, kind), and their log-log slopes."""

    widths: list[int]
    steps: int
    #: (parametrization, width, step, kind) -> mean |x|
    means: dict[tuple[str, int, int, str], float] = field(default_factory=dict)
    #: the same for mean |x_t - x_0|: how far training has moved the activation (0 at step 0)
    changes: dict[tuple[str, int, int, str], float] = field(default_factory=dict)

    def slope(self, parametrization: str, step: int, kind: str, of: str = "means") -> float:
        """The least-squares slope of log mean |x| (``of="changes"``: |x_t - x_0|) against log
        width."""
        table = getattr(self, of)
        xs = [math.log(w) for w in self.widths]
        ys = [math.log(max(table[(parametrization, w, step, kind)], 1e-30)) for w in self.widths]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
            (x - mx) ** 2 for x in xs
        )

    def slopes(
        self, parametrization: str, step: int | None = None, of: str = "means"
    ) -> dict[str, float]:
        """{kind: slope} at ``step`` (None: the last)."""
        step = self.steps - 1 if step is None else step
        return {k: self.slope(parametrization, step, k, of) for k in KINDS}

    def late_slopes(self, parametrization: str, of: str = "means") -> dict[str, float]:
        """{kind: slope} averaged over the second half of the steps (one step's slope is noisy at
        small widths; the check is about where training goes, not the init)."""
        late = range(self.steps // 2, self.steps)
        return {
            k: sum(self.slope(parametrization, t, k, of) for t in late) / len(late) for k in KINDS
        }

    def csv(self) -> str:
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["parametrization", "width", "step", "kind", "mean_abs", "mean_abs_change"])
        for key, v in sorted(self.means.items()):
            w.writerow([*key, f"{v:.6g}", f"{self.changes[key]:.6g}"])
        return out.getvalue()


def mean(values: Sequence[Tensor]) -> float:
    return float(torch.stack(list(values)).mean())


def width_config(model: dict[str, Any], width: int, parametrization: dict[str, Any]) -> ModelConfig:
    """``model`` at ``width`` (d_ff and d_head scaled alike) with ``parametrization``."""
    d = dict(model)
    m = width / d["d_model"]
    d.update(
        d_model=width,
        d_ff=round(d["d_ff"] * m),
        d_head=None if d.get("d_head") is None else round(d["d_head"] * m),
        parametrization=parametrization,
    )
    return ModelConfig.from_dict(d)


@contextmanager
def recording(model: TransformerModel, sink: dict[str, list[Tensor]]) -> Iterator[None]:
    """Record every activation of each kind (detached, in call order) into ``sink`` during the
    forwards inside."""

    def keep(kind: str) -> Callable[..., None]:
        def hook(_: nn.Module, __: Any, out: Any) -> None:
            x = out.out if hasattr(out, "out") else out
            sink[kind].append(x.detach().clone())

        return hook

    handles = [model.tok_embed.register_forward_hook(keep("embedding"))]
    wrapped: list[MultiHeadAttention] = []
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            handles.append(module.register_forward_hook(keep("attn_out")))
            attend = module._attend

            def scored(q: Tensor, k: Tensor, *args: Any, _a=attend, _m=module, **kw: Any) -> Any:
                # q [B, H, T, D], k [B, K, S, D]: the scores scale · q·kᵀ [B, H, T, S]
                kk = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
                scale = _m.scale if _m.scale is not None else q.shape[-1] ** -0.5
                sink["attn_logits"].append((q @ kk.transpose(-2, -1) * scale).detach())
                return _a(q, k, *args, **kw)

            module._attend = scored  # type: ignore[method-assign]
            wrapped.append(module)
        elif isinstance(module, Block):
            handles.append(module.ffn.register_forward_hook(keep("ffn_out")))
    try:
        yield
    finally:
        for h in handles:
            h.remove()
        for module in wrapped:
            del module._attend  # the class's method again


def _loss_and_logits(model: TransformerModel, ids: Tensor) -> tuple[Tensor, Tensor]:
    """A task on the fixed batch that only attention can solve, so every kind of layer learns: the
    next token (a left-to-right model), copying the source (an encoder-decoder: the target is
    the source, read through cross-attention), or each position's left neighbour (a
    bidirectional encoder, whose own token is in its input)."""
    if model.prompt_is_source or model.left_to_right:
        out = model(ids, labels=ids)
    else:
        out = model(ids, labels=ids.roll(1, dims=1))
    return out.loss, out.logits


def coord_check(
    model: dict[str, Any],
    widths: Sequence[int],
    *,
    parametrizations: Sequence[str] = PARAMETRIZATIONS,
    steps: int = 10,
    optim: dict[str, Any] | None = None,
    batch_size: int = 2,
    seq_len: int = 16,
    seed: int = 0,
) -> CoordCheck:
    """Train ``model`` (a plain model config) ``steps`` steps at each width under each
    parametrization on one fixed batch of random tokens; mean |x| of each kind before each step."""
    widths = sorted(int(w) for w in widths)
    if len(widths) < 2 or widths[0] <= 0:
        raise ConfigError(f"widths={widths} needs two or more positive widths, e.g. [64,128,256]")
    for p in parametrizations:
        if p not in PARAMETRIZATIONS:
            raise ConfigError(f"parametrizations has '{p}'; use sp and/or mup")
    optim = optim or {"name": "adamw", "lr": 1e-2}
    result = CoordCheck(widths=widths, steps=steps)
    for p in parametrizations:
        node = {"name": "mup", "base_d_model": widths[0]} if p == "mup" else {"name": "sp"}
        for width in widths:
            torch.manual_seed(seed)
            net = build_model(width_config(model, width, node))
            net.train()
            opt = optimizer_config(optim).build(net, torch.device("cpu"))
            gen = torch.Generator().manual_seed(seed)
            ids = torch.randint(0, net.config.vocab_size, (batch_size, seq_len), generator=gen)
            first: dict[str, list[Tensor]] = {}
            for step in range(steps):
                sink: dict[str, list[Tensor]] = defaultdict(list)
                with recording(net, sink):
                    loss, logits = _loss_and_logits(net, ids)
                sink["output_logits"].append(logits.detach().clone())
                first = first or dict(sink)
                for kind in KINDS:
                    xs, x0s = sink[kind], first[kind]
                    result.means[(p, width, step, kind)] = mean([x.abs().mean() for x in xs])
                    result.changes[(p, width, step, kind)] = mean(
                        [(x - x0).abs().mean() for x, x0 in zip(xs, x0s, strict=True)]
                    )
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
    return result


def plot(result: CoordCheck, path: Path) -> None:
    """One panel per (parametrization, kind): mean |x| against width, a line per step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ps = sorted({p for p, *_ in result.means})
    fig, axes = plt.subplots(len(ps), len(KINDS), figsize=(3.2 * len(KINDS), 2.8 * len(ps)))
    axes = [axes] if len(ps) == 1 else axes
    for row, p in zip(axes, ps, strict=True):
        for ax, kind in zip(row, KINDS, strict=True):
            for step in range(result.steps):
                ys = [result.means[(p, w, step, kind)] for w in result.widths]
                ax.plot(result.widths, ys, marker="o", label=f"step {step}")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{p}: {kind}\nlate slope {result.late_slopes(p)[kind]:+.2f}")
            ax.set_xlabel("d_model")
        row[0].set_ylabel("mean |x|")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(path, suffix=path.suffix) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)


def run(cfg: DictConfig) -> None:
    """The ``coord_check`` subcommand (conf/inspect_coord_check.yaml)."""
    model = to_plain(cfg.model)
    result = coord_check(
        model,
        list(cfg.widths),
        parametrizations=list(cfg.parametrizations),
        steps=int(cfg.steps),
        optim=to_plain(cfg.optim),
        batch_size=int(cfg.batch_size),
        seq_len=int(cfg.seq_len),
        seed=int(cfg.seed),
    )
    out = Path(str(cfg.out_dir))
    atomic_write(out / "coord_check.csv", result.csv())
    plot(result, out / "coord_check.png")
    print(
        f"log-log slope of mean |x| against width, averaged over steps {result.steps // 2} to "
        f"{result.steps - 1} (0: flat; μP should stay near 0, SP's output logits grow):"
    )
    print(f"{'':6}" + "".join(f"{k:>15}" for k in KINDS))
    for p in cfg.parametrizations:
        s = result.late_slopes(p)
        print(f"{p:6}" + "".join(f"{s[k]:>+15.2f}" for k in KINDS))
    print(f"wrote {out / 'coord_check.csv'} and {out / 'coord_check.png'}")
