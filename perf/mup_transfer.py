"""Learning-rate transfer across width: sp against mup (model/parametrization; issue 61).

Tunes AdamW's rate on a log2 grid at each width (d_model 64 and 256 by default; ``--widths``
adds 512), same depth, data, steps and seed, once under ``sp`` and once under ``mup`` with the
smallest width as the base; reports the validation loss of every (parametrization, width, rate),
the best rate per width, and how many grid steps the best rate moved between the smallest and the
largest width. μP's promise (Yang et al. 2022, Tensor Programs V, Fig. 1 / §6): the best rate
stays put (within one grid step); SP's moves down as width grows.

Data: character-level tiny Shakespeare from ``../shared/data/tinyshakespeare/input.txt`` when
present (90/10 split), else a synthetic task (a random order-2 Markov chain over 64 symbols).

    python perf/mup_transfer.py --threads 1               # 64 and 256, 5 rates, ~5 min on an idle core
    python perf/mup_transfer.py --widths 64 256 512       # adds 512 (a few times longer)
    python perf/mup_transfer.py --quick                   # toy sizes, seconds (tests/perf)
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from perf.common import SHARED_DATA, base_parser, machine_header, setup, table
from src.models import ModelConfig, build_model
from src.optim.base import optimizer_config


@dataclass
class Data:
    train: torch.Tensor  # [N] token ids
    val: torch.Tensor
    vocab: int
    source: str


def load_data(seed: int) -> Data:
    path = SHARED_DATA / "tinyshakespeare" / "input.txt"
    if path.exists():
        text = path.read_text(encoding="utf-8")
        chars = sorted(set(text))
        index = {c: i for i, c in enumerate(chars)}
        ids = torch.tensor([index[c] for c in text], dtype=torch.long)
        n = int(0.9 * len(ids))
        return Data(ids[:n], ids[n:], len(chars), f"tiny Shakespeare, characters ({path})")
    # a random order-2 Markov chain: learnable structure, no download
    g = torch.Generator().manual_seed(seed)
    V = 64
    table_ = torch.softmax(3 * torch.randn(V, V, V, generator=g), dim=-1)  # [V, V, V]
    seq = [0, 1]
    for _ in range(200_000):
        seq.append(int(torch.multinomial(table_[seq[-2], seq[-1]], 1, generator=g)))
    ids = torch.tensor(seq)
    n = int(0.9 * len(ids))
    return Data(ids[:n], ids[n:], V, "synthetic order-2 Markov chain over 64 symbols")


def batch(ids: torch.Tensor, B: int, T: int, g: torch.Generator) -> torch.Tensor:
    """[B, T + 1] random windows (the model shifts the labels)."""
    starts = torch.randint(0, len(ids) - T - 1, (B,), generator=g)
    return torch.stack([ids[s : s + T + 1] for s in starts.tolist()])


def run_one(
    data: Data,
    width: int,
    parametrization: dict,
    lr: float,
    *,
    layers: int,
    heads: int,
    steps: int,
    B: int,
    T: int,
    seed: int,
) -> float:
    """Train ``steps`` AdamW steps (linear warmup over the first 10%, then constant) and return
    the validation loss over 8 fixed batches (inf if training diverged)."""
    torch.manual_seed(seed)
    cfg = ModelConfig.from_dict(
        dict(
            vocab_size=data.vocab,
            d_model=width,
            n_layer=layers,
            n_head=heads,
            d_ff=4 * width,
            max_seq_len=T,
            parametrization=parametrization,
        )
    )
    model = build_model(cfg)
    opt = optimizer_config({"name": "adamw", "lr": lr, "betas": [0.9, 0.95]}).build(
        model, torch.device("cpu")
    )
    base = [g["lr"] for g in opt.param_groups]
    warmup = max(1, steps // 10)
    g = torch.Generator().manual_seed(seed)
    for step in range(steps):
        for group, lr0 in zip(opt.param_groups, base, strict=True):
            group["lr"] = lr0 * min(1.0, (step + 1) / warmup)
        x = batch(data.train, B, T, g)
        loss = model(x[:, :-1], labels=x[:, 1:]).loss
        if not torch.isfinite(loss):
            return math.inf
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    model.eval()
    gv = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        losses = [
            float(model(x[:, :-1], labels=x[:, 1:]).loss)
            for x in (batch(data.val, B, T, gv) for _ in range(8))
        ]
    val = sum(losses) / len(losses)
    return val if math.isfinite(val) else math.inf


def main(argv: Sequence[str] | None = None) -> dict:
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--widths", type=int, nargs="+", default=[64, 256])
    p.add_argument("--log2-lrs", type=float, nargs="+", default=[-9, -8, -7, -6, -5])
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=64)
    args = p.parse_args(argv)
    if args.quick:
        args.widths, args.log2_lrs, args.steps, args.batch, args.seq_len = (
            [32, 64],
            [-8, -6],
            3,
            2,
            16,
        )
    setup(args)
    data = load_data(args.seed)
    widths = sorted(args.widths)
    lrs = [2.0**k for k in args.log2_lrs]
    print(
        machine_header(
            "μP learning-rate transfer",
            {
                "data": data.source,
                "model": f"decoder_only, {args.layers} layers, {args.heads} heads, d_ff 4·d, "
                f"T {args.seq_len}, B {args.batch}, {args.steps} AdamW steps (β 0.9/0.95, "
                "10% warmup, constant), seed "
                f"{args.seed}; mup base_d_model {widths[0]}",
            },
        )
    )
    t0 = time.perf_counter()
    loss: dict[tuple[str, int, float], float] = {}
    for w in widths:  # both parametrizations at one width before the next: a partial run compares
        for lr in lrs:
            for name in ("sp", "mup"):
                node = (
                    {"name": "mup", "base_d_model": widths[0]} if name == "mup" else {"name": "sp"}
                )
                t = time.perf_counter()
                loss[(name, w, lr)] = run_one(
                    data,
                    w,
                    node,
                    lr,
                    layers=args.layers,
                    heads=args.heads,
                    steps=args.steps,
                    B=args.batch,
                    T=args.seq_len,
                    seed=args.seed,
                )
                print(
                    f"  {name:4} d {w:4} lr 2^{math.log2(lr):g}: val loss {loss[(name, w, lr)]:.4f} "
                    f"({time.perf_counter() - t:.0f} s)",
                    flush=True,
                )
    rows = [
        [name, w, *(loss[(name, w, lr)] for lr in lrs)] for name in ("sp", "mup") for w in widths
    ]
    print("\nvalidation loss (nats/token) against the rate (columns: log2 lr)\n")
    print(table(["param.", "d_model", *(f"2^{k:g}" for k in args.log2_lrs)], rows))
    best = {
        (name, w): min(range(len(lrs)), key=lambda i: loss[(name, w, lrs[i])])
        for name in ("sp", "mup")
        for w in widths
    }
    shift = {name: best[(name, widths[-1])] - best[(name, widths[0])] for name in ("sp", "mup")}
    print("\nbest rate per width\n")
    print(
        table(
            [
                "param.",
                *(f"d {w}" for w in widths),
                f"grid steps moved ({widths[0]} → {widths[-1]})",
            ],
            [
                [
                    name,
                    *(f"2^{args.log2_lrs[best[(name, w)]]:g}" for w in widths),
                    f"{shift[name]:+d}",
                ]
                for name in ("sp", "mup")
            ],
        )
    )
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return {"loss": loss, "best": best, "shift": shift}


if __name__ == "__main__":
    main()
