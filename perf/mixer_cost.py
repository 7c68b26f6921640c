"""The cost curve of the sequence mixers: training-step time (forward + backward) and peak memory
against sequence length T, softmax attention against each recurrent mixer at equal parameters.

* models: decoder_only, 2 layers, d_model 128, 4 heads, vocab 256, batch 1, float32; every layer
  the same mixer (``model/mixer`` with its conf/model/mixer YAML defaults); attention is SDPA with
  the causal flag (``is_causal``: no T × T mask is built) and RoPE, the recurrent mixers have no
  position scheme. Parameters are equal: each mixer model's ``d_ff`` is solved
  (``src.models.matching.solve_width``) to the attention model's count (GELU FFN, d_ff 4·d).
* time: one training step, forward with labels and backward (no optimizer), the mixers timed
  interleaved at each T (``perf.common.interleaved``), median of the repeats, one torch thread.
  A mixer whose step passes ``--max-step-s`` is not run at longer T (the table says so).
* memory: the resident-set high-water mark (Linux ``VmHWM``) of one fresh subprocess per mixer,
  which builds the model, runs one warm-up step, then for each T (ascending) resets the mark
  through ``/proc/self/clear_refs`` and runs one step: the mark minus the RSS just before that
  step. glibc's mmap threshold is fixed so freed tensors go back to the OS (as ``train_step.py``).
  What it counts: activations, gradients and allocator slack of one step (not the weights).
* slopes: least-squares exponent s of time ∝ T^s over every measured T and over T ≥ 1024 (where
  fixed per-step costs matter least); quadratic attention tends to 2, a linear-time mixer to 1.
* crossover: the T at which a mixer's step becomes faster than attention's, interpolated in
  log-log between the two grid points around the sign change (or "< T_min": faster everywhere;
  "> T_max": not within the grid, with the power-law extrapolation of the top two points).

    python perf/mixer_cost.py                       # T 256 … 8192 (~10 min on an idle core)
    python perf/mixer_cost.py --seq-lens 256,1024 --no-memory
    python perf/mixer_cost.py --quick               # smoke run (seconds)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import yaml  # noqa: E402

from perf.common import base_parser, interleaved, machine_header, median, setup, table  # noqa: E402

MIXERS = ("attention", "linear_attention", "short_conv", "gated_deltanet", "mamba2")
CONF = Path(__file__).resolve().parents[1] / "conf" / "model" / "mixer"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = base_parser(__doc__.split("\n")[0])
    p.add_argument("--seq-lens", default="256,512,1024,2048,4096,8192")
    p.add_argument("--mixers", default=",".join(MIXERS), help="comma-separated; attention first")
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument(
        "--max-step-s", type=float, default=20.0, help="a mixer slower than this stops growing T"
    )
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    p.add_argument("--child", metavar="MIXER", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.seq_lens, args.d_model, args.layers, args.vocab = "64,128", 32, 1, 64
        args.no_memory = True  # a subprocess per mixer costs more than the whole quick run
    args.threads = args.threads or 1
    args.repeats = args.repeats or (1 if args.quick else 3)
    args.seq_lens = [int(t) for t in str(args.seq_lens).split(",") if t]
    args.mixers = [m for m in str(args.mixers).split(",") if m]
    if args.mixers[0] != "attention":
        p.error("--mixers must start with attention (the reference of the parameters and times)")
    return args


def mixer_node(name: str) -> dict[str, Any]:
    """The mixer's conf/model/mixer YAML (its defaults as a run would compose them)."""
    return yaml.safe_load((CONF / f"{name}.yaml").read_text())


def model_dict(args: argparse.Namespace, mixer: str, d_ff: int) -> dict[str, Any]:
    attention = mixer == "attention"
    return {
        "family": "decoder_only",
        "vocab_size": args.vocab,
        "d_model": args.d_model,
        "n_layer": args.layers,
        "n_head": args.heads,
        "d_ff": d_ff,
        "max_seq_len": max(args.seq_lens),
        "dropout": 0.0,
        "bias": False,
        "norm": {"name": "rmsnorm", "eps": 1e-5},
        "ffn": {"name": "gelu"},
        "position": {"name": "rope"} if attention else {"name": "none"},
        "mixer": mixer_node(mixer),
    }


def matched_models(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Each mixer's model dict, its d_ff solved to the attention model's parameter count."""
    from src.models.matching import count_parameters, solve_width

    reference = model_dict(args, "attention", 4 * args.d_model)
    target = count_parameters(reference)
    out = {"attention": reference}
    for m in args.mixers[1:]:
        out[m] = solve_width(model_dict(args, m, 4 * args.d_model), target)
    return out


def make_step(model: torch.nn.Module, ids: torch.Tensor):
    """One training step without the optimizer: forward with labels, backward."""

    def step() -> None:
        model.zero_grad(set_to_none=True)
        model(ids, labels=ids).loss.backward()

    return step


def build(args: argparse.Namespace, cfg: dict[str, Any]) -> torch.nn.Module:
    from src.models import build_model

    torch.manual_seed(args.seed)
    return build_model(cfg).train()


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def child(args: argparse.Namespace) -> None:
    """One mixer in this fresh process: the peak RSS of one training step at each T, ascending."""
    name = args.child
    model = build(args, matched_models(args)[name])
    peaks = {}
    for i, T in enumerate(args.seq_lens):
        ids = torch.randint(0, args.vocab, (1, T), generator=torch.Generator().manual_seed(T))
        step = make_step(model, ids)
        if i == 0:
            step()  # warm-up: lazy imports, kernels' first-call setup, allocator pools
        model.zero_grad(set_to_none=True)
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := the current RSS
        base = _status("VmHWM")  # that RSS, read after the reset: the mark never falls below it
        step()
        peaks[T] = _status("VmHWM") - base
    print(json.dumps(peaks))


def measure_memory(args: argparse.Namespace, name: str, seq_lens: list[int]) -> dict[int, int]:
    """Bytes over the pre-step RSS that one training step of ``name`` peaks at, per T."""
    if not seq_lens:
        return {}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name]
    cmd += ["--seq-lens", ",".join(map(str, seq_lens)), "--mixers", ",".join(args.mixers)]
    for flag, v in (
        ("--d-model", args.d_model),
        ("--layers", args.layers),
        ("--heads", args.heads),
        ("--vocab", args.vocab),
        ("--threads", args.threads),
        ("--seed", args.seed),
    ):
        cmd += [flag, str(v)]
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode:
        raise RuntimeError(f"memory subprocess ({name}) failed:\n{r.stderr[-2000:]}")
    return {int(t): int(b) for t, b in json.loads(r.stdout.strip().splitlines()[-1]).items()}


def slope(points: list[tuple[int, float]]) -> float | None:
    """Least-squares exponent s of y ∝ T^s (None below two points)."""
    pts = [(math.log(t), math.log(y)) for t, y in points if y > 0]
    if len(pts) < 2:
        return None
    mx, my = sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def crossover(attn: dict[int, float], mixer: dict[int, float]) -> str:
    """Where ``mixer``'s step time falls below attention's (see the module docstring)."""
    ts = sorted(set(attn) & set(mixer))
    if not ts:
        return "-"
    logr = [math.log(mixer[t] / attn[t]) for t in ts]  # < 0: the mixer is faster
    if logr[0] < 0 and all(r < 0 for r in logr):
        return f"< {ts[0]} (faster at every T)"
    for (t0, r0), (t1, r1) in zip(zip(ts, logr), zip(ts[1:], logr[1:])):
        if r0 >= 0 > r1:  # interpolate log r linearly in log T
            x = math.log(t0) + r0 / (r0 - r1) * (math.log(t1) - math.log(t0))
            return f"≈ {math.exp(x):,.0f} (between {t0} and {t1})"
    if logr[-1] < 0:
        return f"≤ {ts[-1]} (not monotone)"
    if len(ts) >= 2:  # both power laws through the top two points: a·T^s = b·T^u
        t0, t1 = ts[-2], ts[-1]
        s_a = math.log(attn[t1] / attn[t0]) / math.log(t1 / t0)
        s_m = math.log(mixer[t1] / mixer[t0]) / math.log(t1 / t0)
        if s_a > s_m:
            x = math.log(t1) + logr[-1] / (s_a - s_m)
            return f"> {ts[-1]} (extrapolated ≈ {math.exp(x):,.0f})"
    return f"> {ts[-1]}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    setup(args)
    if args.child:
        child(args)
        return {}
    from src.models.matching import count_parameters

    cfgs = matched_models(args)
    params = {m: count_parameters(c) for m, c in cfgs.items()}
    times: dict[str, dict[int, float]] = {m: {} for m in args.mixers}
    memory: dict[str, dict[int, int]] = {m: {} for m in args.mixers}
    capped: dict[str, int] = {}
    models = {m: build(args, c) for m, c in cfgs.items()}
    for T in args.seq_lens:
        live = [m for m in args.mixers if m not in capped]
        ids = torch.randint(0, args.vocab, (1, T), generator=torch.Generator().manual_seed(T))
        steps = {m: make_step(models[m], ids) for m in live}
        got = interleaved(steps, repeats=args.repeats, warmup=1)
        for m in live:
            times[m][T] = median(got[m])
            if times[m][T] > args.max_step_s:
                capped[m] = T
        print(f"T={T}: " + ", ".join(f"{m} {times[m][T]:.3f}s" for m in live), file=sys.stderr)
    if not args.no_memory:  # after the timing: one fresh process per mixer, its timed T only
        for m in args.mixers:
            memory[m] = measure_memory(args, m, sorted(times[m]))

    print(
        machine_header(
            "Mixer cost curve: training-step time and peak memory against T, equal parameters",
            {
                "shape": f"decoder_only, {args.layers} layers, d_model {args.d_model}, "
                f"{args.heads} heads, vocab {args.vocab}, batch 1, float32",
                "parameters": ", ".join(
                    f"{m} {params[m]:,} (d_ff {cfgs[m]['d_ff']})" for m in args.mixers
                ),
                "step": f"forward with labels + backward, median of {args.repeats} "
                "(mixers interleaved at each T)",
                "peak memory": "skipped"
                if args.no_memory
                else "VmHWM of a fresh subprocess per mixer, reset before each T's step, minus "
                "the RSS before that step (MiB)",
            },
        )
    )
    print()
    print("Step time (ms):\n")
    rows = [[T] + [_ms(times[m].get(T)) for m in args.mixers] for T in args.seq_lens]
    print(table(["T", *args.mixers], rows))
    if not args.no_memory:
        print("\nPeak memory of one step (MiB):\n")
        rows = [[T] + [_mib(memory[m].get(T)) for m in args.mixers] for T in args.seq_lens]
        print(table(["T", *args.mixers], rows))
    summary = []
    for m in args.mixers:
        pts = sorted(times[m].items())
        s_all = slope(pts)
        s_top = slope([(t, y) for t, y in pts if t >= 1024])
        mem_pts = [(t, float(b)) for t, b in sorted(memory[m].items()) if b]
        summary.append(
            [
                m,
                _fmt(s_all),
                _fmt(s_top),
                _fmt(slope(mem_pts)),
                "-" if m == "attention" else crossover(times["attention"], times[m]),
                f"stopped after T={capped[m]}" if m in capped else "",
            ]
        )
    print("\nLog-log slopes and crossover with attention:\n")
    print(
        table(
            [
                "mixer",
                "time slope (all T)",
                "time slope (T ≥ 1024)",
                "memory slope",
                "faster than attention from T",
                "note",
            ],
            summary,
        )
    )
    return {"times": times, "memory": memory, "params": params, "summary": summary}


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{1e3 * s:,.1f}"


def _mib(b: int | None) -> str:
    return "-" if b is None else f"{b / 2**20:,.1f}"


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


if __name__ == "__main__":
    main()
