"""Training-step throughput: our decoder-only GPT-2 vs transformers' GPT2LMHeadModel.

Both models hold the SAME weights (ours copied into theirs, logits checked equal) and run
one optimizer step — forward with ``labels`` (the loss shifted inside the model, as both
libraries do), backward, ``torch.optim.AdamW`` — on the same batch. Timings are
interleaved in one process; the table reports the median of the repeats.

Peak memory: the resident-set high-water mark (Linux ``VmHWM``, reset through
``/proc/self/clear_refs`` once the model and optimizer are built) of a *fresh subprocess
per model*, with glibc's mmap threshold fixed so freed tensors go back to the OS. It is
reported as the peak during the training steps minus the RSS after imports (weights +
gradients + AdamW state + activations + allocator slack).

    python perf/train_step.py                 # 4 layers, d 256, T 256, vocab 50257 (~1 min)
    python perf/train_step.py --gpt2-small    # 12 layers, d 768, T 1024 (slow on CPU)
    python perf/train_step.py --quick         # smoke run
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch  # noqa: E402

from perf.common import (  # noqa: E402
    add_shape_args,
    base_parser,
    check_same_logits,
    gpt2_config_dict,
    hf_gpt2_like,
    interleaved,
    machine_header,
    median,
    mib,
    peak_rss_bytes,
    rss_bytes,
    setup,
    spread,
    table,
    verdict,
)

TARGET_SPEED = 1.30  # ours / transformers tokens/s (issue 17)
TARGET_MEMORY = 0.8  # ours / transformers peak training memory


def parse_args(argv: list[str] | None = None):
    p = base_parser(__doc__.split("\n")[0])
    add_shape_args(p, batch=4)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--steps", type=int, default=2, help="optimizer steps per timed repeat")
    p.add_argument(
        "--gpt2-small",
        action="store_true",
        help="full GPT-2 small: 12 layers, d 768, 12 heads, T 1024, batch 1",
    )
    p.add_argument(
        "--no-memory",
        action="store_true",
        help="skip the peak-memory subprocesses (--quick skips them)",
    )
    p.add_argument("--memory-child", choices=["ours", "transformers"], help=argparse_hidden())
    p.add_argument("--weights", help=argparse_hidden())
    args = p.parse_args(argv)
    if args.gpt2_small:
        args.layers, args.d_model, args.heads, args.seq_len, args.batch = 12, 768, 12, 1024, 1
        args.repeats = args.repeats or 3
        args.steps = 1
    if args.quick:
        args.layers, args.d_model, args.heads, args.seq_len, args.batch, args.vocab = (
            2,
            64,
            4,
            64,
            2,
            4096,
        )
        args.steps, args.repeats = 1, args.repeats or 3
        args.no_memory = (
            True  # two fresh interpreters importing transformers: not a few-seconds smoke run
        )
    args.repeats = args.repeats or 7
    return args


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


def build_pair(args):
    """Our model and transformers' copy of it."""
    from src.models import build_model

    cfg = gpt2_config_dict(args.layers, args.d_model, args.heads, args.seq_len, args.vocab)
    ours = build_model(cfg)
    hf = hf_gpt2_like(ours)
    return ours, hf


def make_step(model, ids):
    """One optimizer step: forward(labels) + backward + AdamW (fresh optimizer per model)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    model.train()

    def step() -> float:
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return out.loss.detach()

    return step


# -- peak memory: one fresh subprocess per model ---------------------------------------------
def _read_status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def memory_child(args) -> None:
    import gc

    from src.models import build_model

    if args.memory_child == "transformers":
        import transformers  # noqa: F401 - before the baseline, so its import is not counted

    rss0 = rss_bytes()
    cfg = gpt2_config_dict(args.layers, args.d_model, args.heads, args.seq_len, args.vocab)
    model = build_model(cfg)
    model.load_state_dict(torch.load(args.weights, weights_only=True))
    if args.memory_child == "transformers":
        model = hf_gpt2_like(model)
    gc.collect()
    ids = torch.randint(
        0, args.vocab, (args.batch, args.seq_len), generator=torch.Generator().manual_seed(1)
    )
    step = make_step(model, ids)
    rss_setup = rss_bytes()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
        how = "VmHWM (reset after setup)"
    except OSError:
        how = "ru_maxrss (whole process)"
    for _ in range(2):
        step()
    peak = _read_status("VmHWM") if how.startswith("VmHWM") else peak_rss_bytes()
    print(json.dumps({"rss_imports": rss0, "rss_setup": rss_setup, "peak": peak, "how": how}))


def measure_memory(args, ours, who: tuple[str, ...] = ("ours", "transformers")) -> dict[str, dict]:
    """Peak training memory of each model in ``who``, one fresh subprocess each."""
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        wpath = os.path.join(tmp, "weights.pt")
        torch.save(ours.state_dict(), wpath)
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
        base = [
            sys.executable,
            __file__,
            "--layers",
            str(args.layers),
            "--d-model",
            str(args.d_model),
            "--heads",
            str(args.heads),
            "--seq-len",
            str(args.seq_len),
            "--batch",
            str(args.batch),
            "--vocab",
            str(args.vocab),
            "--weights",
            wpath,
        ]
        if args.threads:
            base += ["--threads", str(args.threads)]
        procs = {  # side by side: each process's RSS is its own, and the start-ups overlap
            name: subprocess.Popen(
                base + ["--memory-child", name],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name in who
        }
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=900)
            if proc.returncode:
                raise RuntimeError(f"memory subprocess ({name}) failed:\n{err[-2000:]}")
            results[name] = json.loads(out.strip().splitlines()[-1])
    return results


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    setup(args)
    if args.memory_child:
        memory_child(args)
        return {}
    ours, hf = build_pair(args)
    diff = check_same_logits(ours, hf, args.vocab, args.seq_len)
    ids = torch.randint(
        0, args.vocab, (args.batch, args.seq_len), generator=torch.Generator().manual_seed(1)
    )
    tokens = args.batch * args.seq_len
    subjects = {"ours": make_step(ours, ids), "transformers": make_step(hf, ids)}
    loss0 = {k: float(fn()) for k, fn in subjects.items()}  # first step doubles as warm-up
    runs = {k: (lambda fn=fn: [fn() for _ in range(args.steps)]) for k, fn in subjects.items()}
    times = interleaved(runs, repeats=args.repeats, warmup=0)
    tps = {k: args.steps * tokens / median(v) for k, v in times.items()}
    mem = {} if args.no_memory else measure_memory(args, ours)

    print(
        machine_header(
            "Training step: ours vs transformers GPT2LMHeadModel (sdpa), same weights",
            {
                "shape": f"{args.layers} layers, d_model {args.d_model}, {args.heads} heads, T {args.seq_len}, "
                f"batch {args.batch}, vocab {args.vocab} ({ours.num_parameters():,} parameters), fp32",
                "step": "forward(labels) + backward + AdamW(lr 1e-4, wd 0.1); "
                f"{args.steps} step(s) per repeat, median of {args.repeats} interleaved repeats",
                "same weights": f"max |Δlogit| = {diff:.1e}; first-step loss ours {loss0['ours']:.4f} / "
                f"transformers {loss0['transformers']:.4f}",
                "peak memory": "fresh subprocess per model; RSS high-water mark during 2 steps minus RSS after imports"
                if mem
                else "not measured (--no-memory)",
            },
        )
    )
    print()
    rows = []
    for k in ("ours", "transformers"):
        m = mem.get(k)
        rows.append(
            [
                k,
                tps[k],
                1e3 * median(times[k]) / args.steps,
                spread(times[k]),
                mib(m["peak"] - m["rss_imports"]) if m else float("nan"),
            ]
        )
    print(table(["model", "tokens/s", "ms/step", "spread", "peak MiB"], rows))
    ratio = tps["ours"] / tps["transformers"]
    print()
    print(f"speed ours/transformers: {verdict(ratio, TARGET_SPEED)}")
    result = {"tokens_per_s": tps, "ratio": ratio}
    if mem:
        mratio = (mem["ours"]["peak"] - mem["ours"]["rss_imports"]) / (
            mem["transformers"]["peak"] - mem["transformers"]["rss_imports"]
        )
        print(
            f"peak memory ours/transformers: {verdict(mratio, TARGET_MEMORY, higher_is_better=False)}"
        )
        result["memory_ratio"] = mratio
    return result


if __name__ == "__main__":
    main()
