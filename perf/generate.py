"""Decoding throughput: our KV-cache ``generate`` vs transformers' ``generate`` (greedy,
same weights) and vs our own decoding without the cache.

All three decode the same prompt greedily to exactly ``--new-tokens`` tokens (no eos
stop) and must produce the same tokens; timings are interleaved in one process and the
table reports the median of the repeats.

    python perf/generate.py                  # 4 layers, d 256, prompt 32, 256 new tokens (~1 min)
    python perf/generate.py --gpt2-small     # 12 layers, d 768 (random weights)
    python perf/generate.py --quick          # smoke run
"""

from __future__ import annotations

import torch  # noqa: E402

from perf.common import (  # noqa: E402
    add_shape_args,
    base_parser,
    gpt2_config_dict,
    hf_gpt2_like,
    interleaved,
    machine_header,
    median,
    setup,
    spread,
    table,
    verdict,
)

TARGET_VS_TRANSFORMERS = 1.0
TARGET_VS_NO_CACHE = 3.0


def parse_args(argv: list[str] | None = None):
    p = base_parser(__doc__.split("\n")[0])
    add_shape_args(p, batch=1, seq_len=None)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=256)
    p.add_argument("--gpt2-small", action="store_true", help="12 layers, d 768, 12 heads")
    args = p.parse_args(argv)
    if args.gpt2_small:
        args.layers, args.d_model, args.heads = 12, 768, 12
    if args.quick:
        args.layers, args.d_model, args.heads, args.vocab = 2, 64, 4, 4096
        args.prompt_len, args.new_tokens = 8, 16
    args.repeats = args.repeats or (2 if args.quick else 5)
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    setup(args)
    from src.models import build_model
    from src.models.generation import generate

    seq_len = args.prompt_len + args.new_tokens
    model = build_model(
        gpt2_config_dict(args.layers, args.d_model, args.heads, seq_len, args.vocab)
    ).eval()
    hf = hf_gpt2_like(model).eval()
    hf.generation_config.eos_token_id = None  # decode exactly --new-tokens tokens, as ours
    hf.generation_config.pad_token_id = 0
    prompt = torch.randint(
        0, args.vocab, (args.batch, args.prompt_len), generator=torch.Generator().manual_seed(1)
    )
    mask = torch.ones_like(prompt)
    n = args.new_tokens

    outputs: dict[str, torch.Tensor] = {}

    def run(name, fn):
        def call():
            outputs[name] = fn()

        return call

    subjects = {
        "ours, KV cache": run("cache", lambda: generate(model, prompt, n)),
        "transformers generate": run(
            "hf",
            lambda: hf.generate(
                input_ids=prompt, attention_mask=mask, max_new_tokens=n, do_sample=False
            ),
        ),
        "ours, no cache": run("nocache", lambda: generate(model, prompt, n, use_cache=False)),
    }
    with torch.inference_mode():
        times = interleaved(subjects, repeats=args.repeats, warmup=1)
    same_hf = torch.equal(outputs["cache"], outputs["hf"])
    same_nc = torch.equal(outputs["cache"], outputs["nocache"])
    tps = {k: args.batch * n / median(v) for k, v in times.items()}

    print(
        machine_header(
            "Generation: our KV cache vs transformers generate vs our no-cache decoding",
            {
                "shape": f"{args.layers} layers, d_model {args.d_model}, {args.heads} heads, vocab {args.vocab}, "
                f"batch {args.batch}, prompt {args.prompt_len}, {n} new tokens, greedy, fp32",
                "timing": f"median of {args.repeats} interleaved repeats (one full generate call each)",
                "same tokens": f"ours vs transformers {'yes' if same_hf else 'NO'}; cache vs no cache {'yes' if same_nc else 'NO'}",
            },
        )
    )
    print()
    rows = [[k, tps[k], 1e3 * median(times[k]) / n, spread(times[k])] for k in subjects]
    print(table(["decoder", "new tokens/s", "ms/token", "spread"], rows))
    r_hf = tps["ours, KV cache"] / tps["transformers generate"]
    r_nc = tps["ours, KV cache"] / tps["ours, no cache"]
    print()
    print(f"KV cache vs transformers generate: {verdict(r_hf, TARGET_VS_TRANSFORMERS)}")
    print(f"KV cache vs no cache:              {verdict(r_nc, TARGET_VS_NO_CACHE)}")
    return {
        "tokens_per_s": tps,
        "ratio_vs_transformers": r_hf,
        "ratio_vs_no_cache": r_nc,
        "same_tokens": same_hf and same_nc,
    }


if __name__ == "__main__":
    main()
