"""Peak memory of sliding-window attention against sequence length: FlexAttention's BlockMask
(``model.attn_kernel=flex``) against SDPA with the boolean mask (``model.attn_kernel=sdpa``).

One attention call over [B, H, T, D] with a causal window of W keys (``model/mask=sliding_window``),
through the project's own code: ``flex_bias`` + ``flex_attend`` (components/flex.py) and
``build_bias`` + ``sdpa_attention`` (components/block.py, components/attention.py). The subjects:

* ``flex``: the compiled (fused) FlexAttention kernel, forward;
* ``flex_eager``: FlexAttention without torch.compile (its reference implementation), forward;
* ``sdpa_mask``: SDPA with the [1, 1, T, T] boolean mask, forward;
* ``sdpa_mask_fwd_bwd``: the same, forward and backward (the training step's attention).

torch 2.13 has no FlexAttention backward on CPU, so on CPU the flex rows are forward only (on a
GPU ``--backward`` adds flex's forward + backward). Peak memory: the resident-set high-water mark
(Linux ``VmHWM``, reset through ``/proc/self/clear_refs``) of a **fresh subprocess per point**,
after q, k, v and the mask are built (the mask's own bytes are a column apart), glibc's mmap
threshold fixed so freed tensors go back to the OS (``train_step.py``'s method; tracemalloc
cannot see torch's allocations). On CUDA, ``torch.cuda.max_memory_allocated`` instead. The
slope is the least-squares exponent of peak ∝ T^slope over the measured points: ~1 for memory
that grows with T·W, ~2 for T².

    python perf/attention_memory.py --threads 1            # T 1k..16k, W 256
    python perf/attention_memory.py --quick                # toy sizes (the smoke test)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `src` and `perf` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from perf.common import base_parser, machine_header, mib, setup, table  # noqa: E402

SUBJECTS = ("flex", "flex_eager", "sdpa_mask", "sdpa_mask_fwd_bwd")


def parse(argv: list[str] | None = None):
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--seq-lens", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    p.add_argument("--window", type=int, default=256)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument(
        "--max-dense",
        type=int,
        default=8192,
        help="longest T for the subjects that materialise the T × T scores (flex_eager)",
    )
    p.add_argument("--subjects", nargs="+", default=list(SUBJECTS), choices=SUBJECTS)
    p.add_argument("--backward", action="store_true", help="flex forward + backward (GPU only)")
    p.add_argument("--child", nargs=2, metavar=("SUBJECT", "T"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.seq_lens, args.window, args.max_dense = [256, 512], 32, 512
        args.subjects = ["flex_eager", "sdpa_mask"]  # no compile time
    return args


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def child(args) -> None:
    """One point in this fresh process: prints {"peak": bytes over the setup, "mask": bytes}."""
    from src.models.components import flex
    from src.models.components.attention import sdpa_attention
    from src.models.components.block import build_bias
    from src.models.components.masks import MASKS

    subject, T = args.child[0], int(args.child[1])
    cuda = torch.cuda.is_available()
    dev = torch.device("cuda" if cuda else "cpu")
    grad = subject == "sdpa_mask_fwd_bwd" or (subject.startswith("flex") and args.backward)
    B, H, D = args.batch, args.heads, args.head_dim
    q, k, v = (torch.randn(B, H, T, D, device=dev, requires_grad=grad) for _ in range(3))
    mask = MASKS.build({"name": "sliding_window", "window": args.window})
    pos = torch.arange(T, device=dev)
    reset, read, how = _meter(cuda)
    if subject.startswith("flex"):
        flex.COMPILE = subject == "flex"

        def build():
            return flex.flex_bias(mask, q_start=0, k_start=0, q_len=T, k_len=T, device=dev)

        build()  # warm-up at the same shape: compilation, lazy imports
        base = reset()
        fb = build()
        build_peak = read() - base
        bm = fb.block_mask
        mask_bytes = sum(
            t.numel() * t.element_size()
            for t in (bm.kv_num_blocks, bm.kv_indices, bm.full_kv_num_blocks, bm.full_kv_indices)
            if t is not None
        )

        def run():
            return flex.flex_attend(q, k, v, fb)

    else:

        def build():
            return build_bias(mask, pos, pos, None, None, None, q.dtype)

        build()
        base = reset()
        bias = build()
        build_peak = read() - base
        mask_bytes = bias.mask.numel() * bias.mask.element_size()

        def run():
            return sdpa_attention(q, k, v, bias)

    with torch.set_grad_enabled(grad):  # warm-up at the same shape: compilation, lazy imports
        out = run()
        if grad:
            out.sum().backward()
    del out
    for t in (q, k, v):
        t.grad = None
    base = reset()
    with torch.set_grad_enabled(grad):
        out = run()
        if grad:
            out.sum().backward()
    peak = read() - base
    print(json.dumps({"peak": peak, "mask": mask_bytes, "build": build_peak, "how": how}))


def _meter(cuda: bool):
    """(reset() -> baseline bytes, read() -> high-water bytes, what is measured)."""
    if cuda:

        def reset() -> int:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            return torch.cuda.memory_allocated()

        def read() -> int:
            torch.cuda.synchronize()
            return torch.cuda.max_memory_allocated()

        return reset, read, "torch.cuda.max_memory_allocated"

    def reset_rss() -> int:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := the current RSS
        return _status("VmRSS")

    return reset_rss, lambda: _status("VmHWM"), "VmHWM (fresh subprocess, reset before each step)"


def measure(args, subject: str, T: int) -> dict | None:
    cmd = [sys.executable, __file__, "--child", subject, str(T)]
    for flag, value in (
        ("--window", args.window),
        ("--batch", args.batch),
        ("--heads", args.heads),
        ("--head-dim", args.head_dim),
    ):
        cmd += [flag, str(value)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if args.backward:
        cmd.append("--backward")
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode:
        print(f"  {subject} T={T} failed: {r.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def slope(points: list[tuple[int, float]]) -> float | None:
    """Least-squares exponent of y ∝ T^slope (None below two positive points)."""
    pts = [(math.log(t), math.log(y)) for t, y in points if y > 0]
    if len(pts) < 2:
        return None
    mx, my = sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    setup(args)
    if args.child:
        child(args)
        return
    dense = ("flex_eager",)
    results: dict[str, dict[int, dict]] = {s: {} for s in args.subjects}
    how = ""
    for T in args.seq_lens:
        for s in args.subjects:
            if s in dense and T > args.max_dense:
                continue
            r = measure(args, s, T)
            if r is not None:
                results[s][T] = r
                how = r["how"]
    print(
        machine_header(
            "Sliding-window attention: peak memory against T",
            {
                "shape": f"B {args.batch}, H {args.heads}, D {args.head_dim}, float32, window "
                f"W {args.window}",
                "peak memory": how,
                "flex": "forward only on CPU (torch has no CPU FlexAttention backward)"
                if not torch.cuda.is_available() and not args.backward
                else "forward + backward"
                if args.backward
                else "forward",
            },
        )
    )
    print()
    cols = (
        ["T"]
        + [f"{s} MiB" for s in args.subjects]
        + ["bool mask MiB", "BlockMask MiB"]
        + [f"{s} mask build MiB" for s in args.subjects if s in ("flex", "flex_eager", "sdpa_mask")]
    )
    rows = []
    for T in args.seq_lens:
        row: list = [T]
        for s in args.subjects:
            r = results[s].get(T)
            row.append(mib(r["peak"]) if r else "-")
        m = results.get("sdpa_mask", {}).get(T)
        f = results.get("flex", results.get("flex_eager", {})).get(T)
        row += [mib(m["mask"]) if m else "-", mib(f["mask"]) if f else "-"]
        for s in args.subjects:
            if s in ("flex", "flex_eager", "sdpa_mask"):
                r = results[s].get(T)
                row.append(mib(r["build"]) if r else "-")
        rows.append(row)
    slopes: list = ["slope"]
    for s in args.subjects:
        k = slope([(T, r["peak"]) for T, r in results[s].items()])
        slopes.append("-" if k is None else f"{k:.2f}")
    builds = [s for s in args.subjects if s in ("flex", "flex_eager", "sdpa_mask")]
    rows.append(slopes + ["", ""] + [""] * len(builds))
    print(table(cols, rows))
    print()
    print(
        "slope: exponent of peak ∝ T^slope (least squares); ~1 grows with T·W, ~2 with T². "
        "Each peak is the attention call alone, the mask already built; 'mask build' is the "
        "peak of building it (once per batch)."
    )


if __name__ == "__main__":
    main()
