"""Scale of cost: training tokens/s and peak memory against sequence length and model width, ours
vs transformers' GPT2LMHeadModel (same weights), and KV-cache decoding speed against context length.

* sequence length: T = 256 … 4096 at 4 layers, d 256 (vocab 50257), a constant 4096 tokens per
  step (batch = 4096 / T), so the rows differ only in how attention grows with T;
* width: d = 128 … 768 (heads = d / 64) at T 1024, batch 4;
* decoding: greedy, our KV cache vs transformers' ``generate`` (its cache), ms per new token after a
  context of L = 128 … 4096 tokens: ``(time(L -> L + 1 + N) - time(L -> L + 1)) / N``, i.e. without the
  prefill.

Each training row is one optimizer step (forward with labels, backward, AdamW) timed as in
``train_step.py`` (interleaved, median of the repeats); FLOPs per step from ``model.training_flops``
(the model's own count). Peak memory is ``train_step.py``'s fresh-subprocess RSS high-water mark.

    python perf/scaling.py --threads 1              # all three sweeps (~15 min on an idle core)
    python perf/scaling.py --threads 1 --no-memory  # without the peak-memory subprocesses
    python perf/scaling.py --sweeps decode          # one sweep: seq, width, decode (comma-separated)
    python perf/scaling.py --quick                  # smoke run
"""

from __future__ import annotations

import argparse

import torch

from perf import train_step
from perf.common import (
    base_parser,
    check_same_logits,
    gpt2_config_dict,
    hf_gpt2_like,
    interleaved,
    machine_header,
    median,
    mib,
    setup,
    table,
)

SWEEPS = ("seq", "width", "decode")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = base_parser(__doc__.split("\n")[0])
    p.add_argument(
        "--sweeps", default=",".join(SWEEPS), help=f"comma-separated, from {', '.join(SWEEPS)}"
    )
    p.add_argument("--seq-lens", default="256,512,1024,2048,4096")
    p.add_argument("--widths", default="128,256,512,768")
    p.add_argument("--contexts", default="128,512,1024,2048,4096")
    p.add_argument(
        "--tokens", type=int, default=4096, help="tokens per training step in the sequence sweep"
    )
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument(
        "--new-tokens", type=int, default=32, help="decoded tokens timed per context length"
    )
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    args = p.parse_args(argv)
    if args.quick:
        args.seq_lens, args.widths, args.contexts = "32,64", "32,64", "16,48"
        args.tokens, args.layers, args.vocab, args.new_tokens, args.no_memory = 128, 2, 512, 4, True
    args.repeats = args.repeats or (1 if args.quick else 3)
    return args


def _ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x]


def train_row(args: argparse.Namespace, d: int, T: int, B: int) -> dict:
    """Ours vs transformers, one optimizer step at (d, T, B): tokens/s, FLOPs, peak memory."""
    from src.models import build_model

    torch.manual_seed(args.seed)
    heads = max(1, d // 64)
    ours = build_model(gpt2_config_dict(args.layers, d, heads, T, args.vocab))
    hf = hf_gpt2_like(ours)
    check_same_logits(ours, hf, args.vocab, T)
    ids = torch.randint(0, args.vocab, (B, T), generator=torch.Generator().manual_seed(1))
    steps = {"ours": train_step.make_step(ours, ids), "transformers": train_step.make_step(hf, ids)}
    times = interleaved(steps, repeats=args.repeats, warmup=1)
    row = {
        "d": d,
        "T": T,
        "B": B,
        "flops": ours.training_flops(B, T),
        "tps": {k: B * T / median(v) for k, v in times.items()},
    }
    if not args.no_memory:
        ns = argparse.Namespace(
            layers=args.layers,
            d_model=d,
            heads=heads,
            seq_len=T,
            batch=B,
            vocab=args.vocab,
            threads=args.threads,
        )
        mem = train_step.measure_memory(ns, ours)
        row["mib"] = {k: mib(m["peak"] - m["rss_imports"]) for k, m in mem.items()}
    return row


def decode_row(
    model: torch.nn.Module, hf: torch.nn.Module, args: argparse.Namespace, L: int
) -> dict:
    """ms per new token after a context of L tokens, ours (KV cache) and transformers (its cache)."""
    from src.models.generation import generate

    prompt = torch.randint(0, args.vocab, (1, L), generator=torch.Generator().manual_seed(L))
    mask = torch.ones_like(prompt)
    n = args.new_tokens
    out: dict[str, torch.Tensor] = {}

    def ours(k: int):
        return lambda: out.__setitem__(f"ours{k}", generate(model, prompt, k))

    def theirs(k: int):
        return lambda: out.__setitem__(
            f"hf{k}",
            hf.generate(input_ids=prompt, attention_mask=mask, max_new_tokens=k, do_sample=False),
        )

    subjects = {
        "ours 1": ours(1),
        f"ours {n + 1}": ours(n + 1),
        "hf 1": theirs(1),
        f"hf {n + 1}": theirs(n + 1),
    }
    with torch.inference_mode():
        times = interleaved(subjects, repeats=args.repeats, warmup=1)
    ms = {
        who: 1e3 * (median(times[f"{who} {n + 1}"]) - median(times[f"{who} 1"])) / n
        for who in ("ours", "hf")
    }
    same = torch.equal(out[f"ours{n + 1}"], out[f"hf{n + 1}"])
    return {"L": L, "ms": ms, "same": same}


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    setup(args)
    sweeps = [s for s in args.sweeps.split(",") if s]
    unknown = set(sweeps) - set(SWEEPS)
    if unknown:
        raise SystemExit(f"--sweeps: unknown {sorted(unknown)}; choose from {', '.join(SWEEPS)}")
    result: dict = {}
    if "seq" in sweeps:
        result["seq"] = [
            train_row(args, 256 if not args.quick else 32, T, max(1, args.tokens // T))
            for T in _ints(args.seq_lens)
        ]
    if "width" in sweeps:
        T = 1024 if not args.quick else 64
        result["width"] = [
            train_row(args, d, T, 4 if not args.quick else 2) for d in _ints(args.widths)
        ]
    if "decode" in sweeps:
        from src.models import build_model

        contexts = _ints(args.contexts)
        d = 256 if not args.quick else 32
        model = build_model(
            gpt2_config_dict(
                args.layers, d, max(1, d // 64), max(contexts) + args.new_tokens + 1, args.vocab
            )
        ).eval()
        hf = hf_gpt2_like(model).eval()
        hf.generation_config.eos_token_id = (
            None  # decode exactly the asked number of tokens, as ours
        )
        hf.generation_config.pad_token_id = 0
        result["decode"] = [decode_row(model, hf, args, L) for L in contexts]

    print(
        machine_header(
            "Scale of cost: ours vs transformers GPT2LMHeadModel (sdpa), same weights",
            {
                "model": f"GPT-2-shaped, {args.layers} layers, heads = d / 64, vocab {args.vocab}, fp32, random weights",
                "training": "one optimizer step (forward(labels) + backward + AdamW) per timed call, median of "
                f"{args.repeats} interleaved repeats; FLOPs = model.training_flops(B, T)",
                "peak memory": "not measured (--no-memory)"
                if args.no_memory
                else "fresh subprocess per model (train_step.py's RSS high-water mark minus RSS after imports)",
            },
        )
    )
    for key, title, first in (
        ("seq", "Training against sequence length (4096 tokens per step)", "T"),
        ("width", "Training against model width", "d_model"),
    ):
        if key not in result:
            continue
        rows = []
        for r in result[key]:
            tps, mem = r["tps"], r.get("mib", {})
            rows.append(
                [
                    r["T"] if key == "seq" else r["d"],
                    r["B"],
                    r["flops"] / (r["B"] * r["T"]) / 1e6,
                    tps["ours"],
                    tps["transformers"],
                    f"{tps['ours'] / tps['transformers']:.2f}×",
                    mem.get("ours", float("nan")),
                    mem.get("transformers", float("nan")),
                    f"{mem['ours'] / mem['transformers']:.2f}×" if mem else "-",
                ]
            )
        print(f"\n### {title}\n")
        print(
            table(
                [
                    first,
                    "batch",
                    "MFLOP/token",
                    "ours tok/s",
                    "transformers tok/s",
                    "speed ours/tf",
                    "ours MiB",
                    "transformers MiB",
                    "memory ours/tf",
                ],
                rows,
            )
        )
        speed = [r["tps"]["ours"] / r["tps"]["transformers"] for r in result[key]]
        line = f"{key}: speed ours/transformers {min(speed):.2f}× … {max(speed):.2f}×"
        if all("mib" in r for r in result[key]):
            m = [r["mib"]["ours"] / r["mib"]["transformers"] for r in result[key]]
            line += f"; peak memory ours/transformers {min(m):.2f}× … {max(m):.2f}×"
        print(f"\n{line} (no target: how cost grows)")
    if "decode" in result:
        # a per-token time is the difference of two whole-call medians; where the prefill's noise exceeds the
        # decoding time (long contexts, few repeats) it can come out <= 0: shown as not measured, never as a ratio
        ok = [r for r in result["decode"] if r["ms"]["ours"] > 0 and r["ms"]["hf"] > 0]
        rows = [
            [
                r["L"],
                *(f"{r['ms'][k]:.2f}" if r in ok else "n/a (noise)" for k in ("ours", "hf")),
                f"{r['ms']['hf'] / r['ms']['ours']:.2f}×" if r in ok else "-",
                "yes" if r["same"] else "NO",
            ]
            for r in result["decode"]
        ]
        print(
            f"\n### KV-cache decoding against context length ({args.new_tokens} new tokens timed, prefill excluded)\n"
        )
        print(
            table(
                [
                    "context",
                    "ours ms/token",
                    "transformers ms/token",
                    "speed ours/tf",
                    "same tokens",
                ],
                rows,
            )
        )
        if len(ok) < len(result["decode"]):
            print(
                "\nn/a: the prefill's run-to-run noise exceeded the decoding time; use more --repeats or --new-tokens"
            )
        speed = [r["ms"]["hf"] / r["ms"]["ours"] for r in ok]
        if speed:
            print(
                f"\ndecode: speed ours/transformers {min(speed):.2f}× … {max(speed):.2f}× (no target: how cost grows)"
            )
    return result


if __name__ == "__main__":
    main()
