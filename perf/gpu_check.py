"""GPU check for one H100/H200 (the Python part of ``perf/gpu_check.sh``).

GPT-2 small (124 M parameters), T = 1024, bf16 autocast (as Lightning's ``bf16-mixed``),
fused AdamW, TF32 on: tokens/s, MFU against the dense bf16 peak (989 TFLOP/s for
H100/H200 SXM; ``--peak-tflops``) and peak memory (``torch.cuda.max_memory_allocated``
over the timed steps), for

* eager,
* ``torch.compile`` of the model *and* the loss (one function: forward, cross-entropy),
* eager with the vocabulary padded to a multiple of 64 (50257 -> 50304, nanoGPT),
* FSDP2 on one device (``trainer=fsdp2``'s wrapping, ``src.training.parallel.parallelize``:
  ``fully_shard`` per block and the root, bf16 parameters with fp32 reduce on CUDA), in a
  one-process group: the cost of FSDP2's hooks against eager,

plus a flash-attention check: ``F.scaled_dot_product_attention`` with ``is_causal`` under
``sdpa_kernel(FLASH_ATTENTION)`` alone and through our whole model (which only works if
our causal path hands SDPA no explicit mask), and the kernels' speed at GPT-2's shape.

``--cpu-smoke`` runs every part on CPU at toy size (autocast bf16 on CPU, compile with
the ``aot_eager`` backend unless ``--compile-backend`` says otherwise), so the script is
exercised where no GPU exists. Installs nothing.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch.nn import functional as F  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cpu-smoke", action="store_true", help="toy sizes on CPU (no GPU needed)")
    p.add_argument("--batch", type=int, default=16, help="sequences per step (T = 1024)")
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--steps", type=int, default=20, help="timed optimizer steps per variant")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak of one device")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument(
        "--compile-backend",
        default=None,
        help="torch.compile backend (default inductor; aot_eager in --cpu-smoke)",
    )
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument(
        "--profile-steps",
        type=int,
        default=3,
        help="torch.profiler over this many steps of the compiled variant (eager with --no-compile); 0 = off",
    )
    args = p.parse_args(argv)
    args.vocab = 50257
    if args.cpu_smoke:
        args.batch, args.seq_len, args.steps, args.warmup, args.vocab = 2, 64, 2, 1, 500
        args.compile_backend = args.compile_backend or "aot_eager"
    args.compile_backend = args.compile_backend or "inductor"
    return args


def model_config(args: argparse.Namespace, vocab_pad_multiple: int = 1) -> dict:
    from perf.common import gpt2_config_dict

    if args.cpu_smoke:
        return gpt2_config_dict(
            2, 64, 4, args.seq_len, args.vocab, vocab_pad_multiple=vocab_pad_multiple
        )
    return gpt2_config_dict(
        12,
        768,
        12,
        args.seq_len,
        args.vocab,
        vocab_pad_multiple=vocab_pad_multiple,
        name="gpt2_small",
    )


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def environment(device: torch.device) -> dict:
    env = {"python": platform.python_version(), "torch": torch.__version__, "device": str(device)}
    if device.type == "cuda":
        env.update(
            gpu=torch.cuda.get_device_name(0),
            capability=".".join(map(str, torch.cuda.get_device_capability(0))),
            cuda=torch.version.cuda,
            memory_gib=round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1),
            bf16=torch.cuda.is_bf16_supported(),
            flash_sdp_enabled=torch.backends.cuda.flash_sdp_enabled(),
        )
    return env


# -- flash attention -------------------------------------------------------------------------
def flash_check(args: argparse.Namespace, device: torch.device) -> dict:
    """SDPA flash kernel: alone (vs the math kernel), timed, and through our whole model."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from src.models import build_model

    out: dict = {}
    B, H, T, D = (2, 4, 64, 16) if args.cpu_smoke else (args.batch, 12, args.seq_len, 64)
    dtype = torch.bfloat16
    g = torch.Generator(device="cpu").manual_seed(0)
    q, k, v = (
        torch.randn(B, H, T, D, generator=g).to(device, dtype).requires_grad_() for _ in range(3)
    )
    backends = {
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "math": SDPBackend.MATH,
    }
    # CPU has its own flash kernel; the CUDA-only efficient one does not exist there
    if device.type == "cpu":
        backends.pop("efficient")
    ref = None
    for name, backend in backends.items():
        try:
            with sdpa_kernel(backend):
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                y.float().sum().backward()
                sync(device)
                t0 = time.perf_counter()
                for _ in range(10):
                    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    y.float().sum().backward()
                sync(device)
            ms = (time.perf_counter() - t0) / 10 * 1e3
            if name == "math":
                ref = y.detach().float()
            out[name] = {"ok": True, "ms_fwd_bwd": round(ms, 3), "out": y.detach().float()}
        except RuntimeError as e:  # "No available kernel"
            out[name] = {"ok": False, "error": str(e).splitlines()[0][:200]}
    for r in out.values():
        if r.get("ok") and ref is not None:
            r["max_abs_diff_vs_math"] = float((r.pop("out") - ref).abs().max())
        else:
            r.pop("out", None)
    # our whole model with only the flash kernel allowed: fails if the causal path passed a mask
    model = build_model(model_config(args)).to(device)
    ids = torch.randint(0, args.vocab, (2, args.seq_len), device=device)
    try:
        with (
            sdpa_kernel(SDPBackend.FLASH_ATTENTION),
            torch.autocast(device.type, dtype=torch.bfloat16),
        ):
            loss = model(ids, labels=ids).loss
        loss.backward()
        out["model_flash_only"] = {"ok": True, "loss": round(float(loss.detach()), 4)}
    except RuntimeError as e:
        out["model_flash_only"] = {"ok": False, "error": str(e).splitlines()[0][:200]}
    return out


# -- training-step throughput ----------------------------------------------------------------
def profile_top(step, steps: int, device: torch.device, rows: int = 12) -> list[dict]:
    """The ops taking the most self time (device time on CUDA, CPU time elsewhere) over ``steps``
    calls of ``step`` under ``torch.profiler``: name, ms per step, share of the profiled total."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        sync(device)
    key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    events = [e for e in prof.key_averages() if getattr(e, key, 0) > 0]
    total = sum(getattr(e, key) for e in events) or 1.0
    events.sort(key=lambda e: -getattr(e, key))
    return [
        {
            "op": e.key[:80],
            "ms_per_step": round(getattr(e, key) / 1e3 / steps, 3),
            "share": round(getattr(e, key) / total, 4),
            "calls_per_step": round(e.count / steps, 1),
        }
        for e in events[:rows]
    ]


def train_variant(
    args: argparse.Namespace,
    device: torch.device,
    compiled: bool,
    vocab_pad_multiple: int,
    profile_steps: int = 0,
    fsdp2: bool = False,
) -> dict:
    from src.models import build_model

    torch.manual_seed(0)
    model = build_model(model_config(args, vocab_pad_multiple)).to(device).train()
    if fsdp2:
        fsdp2_one_device(model, device)
    opt = torch.optim.AdamW(
        model.parameters(),
        lr=6e-4,
        betas=(0.9, 0.95),
        weight_decay=0.1,
        fused=device.type == "cuda",
    )
    B, T = args.batch, args.seq_len
    g = torch.Generator(device="cpu").manual_seed(1)
    tokens = torch.randint(0, args.vocab, (B, T + 1), generator=g).to(device)
    x, y = tokens[:, :-1], tokens  # the window form of the labels: every position scored

    def loss_fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return model(x, labels=y).loss  # what src.objectives.causal_lm computes

    fn = torch.compile(loss_fn, backend=args.compile_backend) if compiled else loss_fn

    def step() -> torch.Tensor:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    t0 = time.perf_counter()
    first = step()
    sync(device)
    first_s = time.perf_counter() - t0  # includes compilation
    for _ in range(args.warmup - 1):
        step()
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        last = step()
    sync(device)
    dt = (time.perf_counter() - t0) / args.steps
    tps = B * T / dt
    # the model's own count (forward + backward), as ThroughputMonitor's
    fpt = model.training_flops(B, T) / (B * T)
    res = {
        "ms_per_step": round(dt * 1e3, 2),
        "tokens_per_s": round(tps),
        "mfu": round(fpt * tps / (args.peak_tflops * 1e12), 4),
        "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)
        if device.type == "cuda"
        else None,
        "first_step_s": round(first_s, 1),
        "loss_first": round(float(first), 4),
        "loss_last": round(float(last), 4),
        "flops_per_token": round(fpt),
    }
    if profile_steps:
        res["profile"] = profile_top(step, profile_steps, device)
    model = opt = None  # free the GPU memory (step's closure holds them) before empty_cache
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return res


def fsdp2_one_device(model: torch.nn.Module, device: torch.device) -> None:
    """``trainer=fsdp2``'s wrapping on a one-process group (gloo on CPU, NCCL on CUDA) and a
    1 x 1 (data-parallel x tensor-parallel) mesh; the group is destroyed by ``end_fsdp2``."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy

    from src.training.parallel import parallelize

    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    mesh = init_device_mesh(
        device.type, (1, 1), mesh_dim_names=("data_parallel", "tensor_parallel")
    )
    param = torch.bfloat16 if device.type == "cuda" else torch.float32
    policy = MixedPrecisionPolicy(param_dtype=param, reduce_dtype=torch.float32)
    parallelize(model, mesh, mp_policy=policy)


def end_fsdp2() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if not args.cpu_smoke and not torch.cuda.is_available():
        sys.exit(
            "gpu_check: no CUDA device visible (use --cpu-smoke to exercise the script on CPU)"
        )
    device = torch.device("cpu" if args.cpu_smoke else "cuda")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    env = environment(device)
    print("## GPU check" + (" (CPU smoke run, toy sizes)" if args.cpu_smoke else ""))
    print()
    for k, v in env.items():
        print(f"- {k}: {v}")
    print(
        f"- shape: batch {args.batch} × T {args.seq_len}, bf16 autocast, fused AdamW, clip 1.0; "
        f"{args.steps} timed steps after {args.warmup} warm-up; MFU vs {args.peak_tflops:g} TFLOP/s"
    )
    print()

    flash = flash_check(args, device)
    print("### Flash attention (SDPA, is_causal, bf16)")
    print()
    print("| kernel | works | ms fwd+bwd | max abs diff vs math |")
    print("|---|---|---|---|")
    for name, r in flash.items():
        if name == "model_flash_only":
            continue
        print(
            f"| {name} | {'yes' if r['ok'] else 'no: ' + r['error']} | {r.get('ms_fwd_bwd', '-')} | "
            f"{r.get('max_abs_diff_vs_math', '-') if r['ok'] else '-'} |"
        )
    mf = flash["model_flash_only"]
    print()
    outcome = f"OK (loss {mf['loss']})" if mf["ok"] else f"FAILED: {mf['error']}"
    print(f"our model with only the flash kernel allowed: {outcome}")
    print()

    variants = [("eager", False, 1, False)]
    if not args.no_compile:
        variants.append((f"torch.compile ({args.compile_backend}), model + loss", True, 1, False))
    variants.append(("eager, vocab padded to a multiple of 64", False, 64, False))
    variants.append(("FSDP2, 1 device (eager)", False, 1, True))
    results = {}
    profiled = variants[1][0] if not args.no_compile else variants[0][0]
    for name, compiled, pad, fsdp2 in variants:
        try:
            results[name] = train_variant(
                args, device, compiled, pad, args.profile_steps if name == profiled else 0, fsdp2
            )
        except Exception as e:  # noqa: BLE001 - report and go on with the other variants
            results[name] = {
                "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            }
        finally:
            if fsdp2:
                end_fsdp2()
        print(f"[{name}] {json.dumps(results[name])}", flush=True)
    print()
    print(
        "### Training step, GPT-2 small"
        + (" (toy model in the smoke run)" if args.cpu_smoke else "")
    )
    print()
    print(
        "| variant | tokens/s | MFU | peak memory GiB | ms/step | first step s (incl. compile) | loss first → last |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        if "error" in r:
            print(f"| {name} | failed: {r['error']} | | | | | |")
            continue
        mem = "-" if r["peak_mem_gib"] is None else f"{r['peak_mem_gib']:.2f}"
        print(
            f"| {name} | {r['tokens_per_s']:,} | {100 * r['mfu']:.1f}% | {mem} | {r['ms_per_step']} | "
            f"{r['first_step_s']} | {r['loss_first']} → {r['loss_last']} |"
        )
    eager = results.get("eager", {})
    comp = next((r for n, r in results.items() if n.startswith("torch.compile")), {})
    if "tokens_per_s" in eager and "tokens_per_s" in comp:
        print()
        print(f"compile speed-up: {comp['tokens_per_s'] / eager['tokens_per_s']:.2f}×")
    top = results.get(profiled, {}).get("profile")
    if top:
        print()
        print(
            f"### Where a step's time goes: {profiled}, torch.profiler over {args.profile_steps} steps "
            f"({'device' if device.type == 'cuda' else 'CPU'} self time)"
        )
        print()
        print("| op | ms/step | share | calls/step |")
        print("|---|---|---|---|")
        for r in top:
            print(
                f"| {r['op']} | {r['ms_per_step']} | {100 * r['share']:.1f}% | {r['calls_per_step']} |"
            )
    report = {"env": env, "flash": flash, "train": results, "args": vars(args)}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    ok = mf["ok"] and all("error" not in r for r in results.values())
    if not ok:
        print("\ngpu_check: SOME CHECKS FAILED (see above)")
    return report


if __name__ == "__main__":
    rep = main()
    failed = not rep["flash"]["model_flash_only"]["ok"] or any(
        "error" in r for r in rep["train"].values()
    )
    sys.exit(1 if failed else 0)
