"""Training-step throughput: our decoder-only GPT-2 vs transformers' GPT2LMHeadModel.

Both models hold the SAME weights (ours copied into theirs, logits checked equal) and run
one optimizer step — forward with ``labels`` (the loss shifted inside the model, as both
libraries do), backward, ``torch.optim.AdamW`` — on the same batch. Ours computes its loss
as its training step does: the head and the cross-entropy over chunks of ``--loss-chunk``
tokens (``objective.loss_chunk_tokens``, 1024 by default; 0 = the forward's loss over the
full logits). Timings are interleaved in one process; the table reports the median of the
repeats. ``--profile`` adds torch.profiler's top operators of one step of each.

Peak memory: the resident-set high-water mark (Linux ``VmHWM``, reset through
``/proc/self/clear_refs`` once the model and optimizer are built) of a *fresh subprocess
per model*, with glibc's mmap threshold fixed so freed tensors go back to the OS. It is
reported as the peak during the training steps minus the RSS after imports (weights +
gradients + AdamW state + activations + allocator slack).

    python perf/train_step.py                 # 4 layers, d 256, T 256, vocab 50257 (~1 min)
    python perf/train_step.py --gpt2-small    # 12 layers, d 768, T 1024, B 4 (slow on CPU)
    python perf/train_step.py --quick         # smoke run
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
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
TARGET_MEMORY_GPT2_SMALL = 0.6  # GPT-2 small at B 4, T 1024 (issue 58)


def parse_args(argv: list[str] | None = None):
    p = base_parser(__doc__.split("\n")[0])
    add_shape_args(p, batch=4)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--steps", type=int, default=2, help="optimizer steps per timed repeat")
    p.add_argument(
        "--loss-chunk",
        type=int,
        default=1024,
        help="our loss over chunks of this many tokens (objective.loss_chunk_tokens); 0 = the "
        "forward's loss over the full logits",
    )
    p.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="print torch.profiler's top N operators (self CPU time) of one step of each model",
    )
    p.add_argument(
        "--gpt2-small",
        action="store_true",
        help="full GPT-2 small: 12 layers, d 768, 12 heads, T 1024, batch 4",
    )
    p.add_argument(
        "--memory-only",
        action="store_true",
        help="only the fresh subprocesses (peak memory, and the time of each one's second step, "
        "side by side): what fits a heavy shape such as --gpt2-small on a busy CPU",
    )
    p.add_argument(
        "--with-full-logits",
        action="store_true",
        help="a third subprocess: ours with the forward's loss over the full logits",
    )
    p.add_argument(
        "--with-activation-checkpointing",
        action="store_true",
        help="another subprocess: ours with trainer.activation_checkpointing=true (each block "
        "recomputed in the backward, src.training.parallel.checkpoint_blocks)",
    )
    p.add_argument(
        "--no-memory",
        action="store_true",
        help="skip the peak-memory subprocesses (--quick skips them)",
    )
    p.add_argument(
        "--memory-child",
        choices=["ours", "ours-full-logits", "ours-checkpointed", "transformers"],
        help=argparse_hidden(),
    )
    p.add_argument("--weights", help=argparse_hidden())
    args = p.parse_args(argv)
    if args.gpt2_small:
        args.layers, args.d_model, args.heads, args.seq_len, args.batch = 12, 768, 12, 1024, 4
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


def make_step(model, ids, loss_chunk: int = 0):
    """One optimizer step: forward(labels) + backward + AdamW (fresh optimizer per model).
    ``loss_chunk`` > 0 (ours): the loss as ``LMTask.training_loss`` computes it, the head and
    the cross-entropy over chunks of that many tokens."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    model.train()

    def loss_of() -> torch.Tensor:
        if loss_chunk:
            return model.chunked_loss(model.hidden_states(ids), ids, loss_chunk)
        return model(input_ids=ids, labels=ids).loss

    def step() -> float:
        loss = loss_of()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def profile_table(step, rows: int) -> str:
    """torch.profiler's top ``rows`` operators of one step, by self CPU time."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


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
    if args.memory_child == "ours-checkpointed":
        from src.training.parallel import checkpoint_blocks

        checkpoint_blocks(model)  # what trainer.activation_checkpointing=true does
    gc.collect()
    ids = torch.randint(
        0, args.vocab, (args.batch, args.seq_len), generator=torch.Generator().manual_seed(1)
    )
    ours_loss = args.memory_child in ("ours", "ours-checkpointed")
    step = make_step(model, ids, args.loss_chunk if ours_loss else 0)
    rss_setup = rss_bytes()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
        how = "VmHWM (reset after setup)"
    except OSError:
        how = "ru_maxrss (whole process)"
    step_s = []
    for _ in range(2):
        t0 = time.perf_counter()
        step()
        step_s.append(time.perf_counter() - t0)
    peak = _read_status("VmHWM") if how.startswith("VmHWM") else peak_rss_bytes()
    out = {"rss_imports": rss0, "rss_setup": rss_setup, "peak": peak, "how": how, "step_s": step_s}
    print(json.dumps(out))


def measure_memory(args, ours, who: tuple[str, ...] = ("ours", "transformers")) -> dict[str, dict]:
    """Peak training memory of each model in ``who``, one fresh subprocess each, all at once."""
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
            "--loss-chunk",
            str(args.loss_chunk),
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
            out, err = proc.communicate(timeout=3600)
            if proc.returncode:
                raise RuntimeError(f"memory subprocess ({name}) failed:\n{err[-2000:]}")
            results[name] = json.loads(out.strip().splitlines()[-1])
    return results


def memory_report(args, ours, diff: float) -> dict:
    """--memory-only: each model's peak training memory and step time in its own process."""
    who = ("ours", "transformers") + (("ours-full-logits",) if args.with_full_logits else ())
    who += ("ours-checkpointed",) if args.with_activation_checkpointing else ()
    mem = measure_memory(args, ours, who)
    print(
        machine_header(
            "Training memory: ours vs transformers GPT2LMHeadModel (sdpa), same weights",
            {
                "shape": f"{args.layers} layers, d_model {args.d_model}, {args.heads} heads, "
                f"T {args.seq_len}, batch {args.batch}, vocab {args.vocab} "
                f"({ours.num_parameters():,} parameters), fp32; max |Δlogit| = {diff:.1e}",
                "step": "forward(labels) + backward + AdamW(lr 1e-4, wd 0.1), 2 steps per process",
                "our loss": f"head + cross-entropy over chunks of {args.loss_chunk} tokens"
                if args.loss_chunk
                else "the forward's, over the full logits",
                "peak memory": "RSS high-water mark (VmHWM) during the 2 steps minus the RSS after "
                "imports, one fresh process per row, the processes side by side",
                "step time": "the second step of each process (not interleaved: a busy machine "
                "makes it noisy)",
            },
        )
    )
    print()
    base = mem["transformers"]["peak"] - mem["transformers"]["rss_imports"]
    rows = []
    for k, m in mem.items():
        used = m["peak"] - m["rss_imports"]
        rows.append([k, mib(used), used / base, 1e3 * m["step_s"][-1]])
    print(table(["model", "peak MiB", "vs transformers", "ms/step"], rows))
    mratio = (mem["ours"]["peak"] - mem["ours"]["rss_imports"]) / base
    target = TARGET_MEMORY_GPT2_SMALL if args.gpt2_small else TARGET_MEMORY
    print()
    print(f"peak memory ours/transformers: {verdict(mratio, target, higher_is_better=False)}")
    return {"memory_ratio": mratio, "memory": mem}


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    setup(args)
    if args.memory_child:
        memory_child(args)
        return {}
    ours, hf = build_pair(args)
    diff = check_same_logits(ours, hf, args.vocab, args.seq_len)
    if args.memory_only:
        return memory_report(args, ours, diff)
    ids = torch.randint(
        0, args.vocab, (args.batch, args.seq_len), generator=torch.Generator().manual_seed(1)
    )
    tokens = args.batch * args.seq_len
    subjects = {
        "ours": make_step(ours, ids, args.loss_chunk),
        "transformers": make_step(hf, ids),
    }
    loss0 = {k: float(fn()) for k, fn in subjects.items()}  # first step doubles as warm-up
    runs = {k: (lambda fn=fn: [fn() for _ in range(args.steps)]) for k, fn in subjects.items()}
    times = interleaved(runs, repeats=args.repeats, warmup=0)
    tps = {k: args.steps * tokens / median(v) for k, v in times.items()}
    profiles = (
        {k: profile_table(fn, args.profile) for k, fn in subjects.items()} if args.profile else {}
    )
    mem = {} if args.no_memory else measure_memory(args, ours)

    print(
        machine_header(
            "Training step: ours vs transformers GPT2LMHeadModel (sdpa), same weights",
            {
                "shape": f"{args.layers} layers, d_model {args.d_model}, {args.heads} heads, T {args.seq_len}, "
                f"batch {args.batch}, vocab {args.vocab} ({ours.num_parameters():,} parameters), fp32",
                "step": "forward(labels) + backward + AdamW(lr 1e-4, wd 0.1); "
                f"{args.steps} step(s) per repeat, median of {args.repeats} interleaved repeats",
                "our loss": f"head + cross-entropy over chunks of {args.loss_chunk} tokens"
                if args.loss_chunk
                else "the forward's, over the full logits",
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
        target = TARGET_MEMORY_GPT2_SMALL if args.gpt2_small else TARGET_MEMORY
        print(f"peak memory ours/transformers: {verdict(mratio, target, higher_is_better=False)}")
        result["memory_ratio"] = mratio
    for k, text in profiles.items():
        print(f"\n### profile of one step: {k} (top {args.profile} by self CPU time)\n")
        print(text)
    return result


if __name__ == "__main__":
    main()
