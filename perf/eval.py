"""Evaluation throughput: examples/s of LAMBADA and HellaSwag scoring with our ``Scorer``
vs a harness-style peer (transformers' GPT2LMHeadModel with the same weights, full logits
and ``log_softmax`` over every position, as lm-evaluation-harness's HF backend).

Both score the same requests (our tokenisation), batched by length with the same batch
size and token budget, and must agree on every log-likelihood. Items come from
``../shared/data`` (LAMBADA test, HellaSwag validation) when present, else synthetic
passages. The model has random weights (this measures speed, not accuracy).

    python perf/eval.py            # 4 layers, d 256, vocab 50257 (~1 min)
    python perf/eval.py --quick    # smoke run
"""

from __future__ import annotations

import torch  # noqa: E402

from perf.common import (  # noqa: E402
    SHARED_DATA,
    base_parser,
    gpt2_config_dict,
    hf_gpt2_like,
    interleaved,
    machine_header,
    median,
    setup,
    spread,
    table,
)


def parse_args(argv: list[str] | None = None):
    p = base_parser(__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--lambada", type=int, default=128, help="LAMBADA passages per repeat")
    p.add_argument(
        "--hellaswag", type=int, default=32, help="HellaSwag items (× 4 endings) per repeat"
    )
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-batch-tokens", type=int, default=4096)
    args = p.parse_args(argv)
    if args.quick:
        args.layers, args.d_model, args.heads = 2, 64, 4
        args.lambada, args.hellaswag = 4, 2
    args.repeats = args.repeats or (2 if args.quick else 3)
    return args


def synthetic_tasks():
    """LAMBADA- and HellaSwag-shaped items from Python's bundled help texts (no download)."""
    from pydoc_data.topics import topics

    from src.evaluation.benchmarks.base import (
        Completion,
        CompletionBenchmark,
        MultipleChoice,
        MultipleChoiceBenchmark,
    )

    words = " ".join(topics.values()).split()

    class SynthLambada(CompletionBenchmark):
        def examples(self):
            for i in range(0, len(words) - 80, 80):
                yield Completion(" ".join(words[i : i + 79]), " " + words[i + 79])

    class SynthHellaSwag(MultipleChoiceBenchmark):
        def examples(self):
            for i in range(0, len(words) - 120, 120):
                w = words[i : i + 120]
                yield MultipleChoice(
                    " ".join(w[:40]), [" ".join(w[40 + 20 * k : 60 + 20 * k]) for k in range(4)], 0
                )

    return SynthLambada(), SynthHellaSwag(), "synthetic (pydoc topics; shared data absent)"


def load_tasks():
    lam = SHARED_DATA / "lambada" / "lambada_test.jsonl"
    hs = SHARED_DATA / "hellaswag_val" / "hellaswag_val_full.txt.bz2"
    if lam.exists() and hs.exists():
        from src.evaluation.benchmarks.hellaswag import HellaSwag
        from src.evaluation.benchmarks.lambada import Lambada

        return (
            Lambada(path=str(lam)),
            HellaSwag(path=str(hs)),
            f"{lam.relative_to(SHARED_DATA.parent)}, {hs.relative_to(SHARED_DATA.parent)}",
        )
    return synthetic_tasks()


def requests_of(task, docs, scorer) -> list[tuple[list[int], list[int]]]:
    """The (context ids, continuation ids) pairs that ``task.run`` scores, in its order."""
    if hasattr(docs[0], "choices"):
        return [
            scorer.encode_pair(d.context, task.target_delimiter + c)
            for d in docs
            for c in d.choices
        ]
    return [scorer.encode_pair(d.context, d.continuation) for d in docs]


def harness_style(
    hf, requests, batch_size: int, max_batch_tokens: int, max_len: int, pad_id: int
) -> list[float]:
    """lm-evaluation-harness's HF recipe: full logits [B, T, V], log_softmax, gather."""
    from src.evaluation.batching import length_batches, pad_right

    inputs = [(list(c) + list(x))[-(max_len + 1) :][:-1] for c, x in requests]
    out: list[float] = [0.0] * len(requests)
    with torch.inference_mode():
        for batch in length_batches([len(x) for x in inputs], batch_size, max_batch_tokens):
            ids, _ = pad_right([inputs[i] for i in batch], pad_id)
            logp = hf(input_ids=ids).logits.float().log_softmax(-1)  # [B, T, V]
            for row, i in enumerate(batch):
                cont = requests[i][1]
                n, end = len(cont), len(inputs[i])
                lp = logp[row, end - n : end].gather(-1, torch.tensor(cont)[:, None]).squeeze(-1)
                out[i] = float(lp.double().sum())
    return out


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    setup(args)
    from src.data.tokenizers import build_tokenizer
    from src.evaluation.benchmarks.base import take
    from src.evaluation.scorer import Scorer
    from src.models import build_model

    tok = build_tokenizer({"name": "gpt2"})
    model = build_model(gpt2_config_dict(args.layers, args.d_model, args.heads, 1024)).eval()
    hf = hf_gpt2_like(model).eval()
    scorer = Scorer(
        model,
        tok,
        batch_size=args.batch_size,
        max_batch_tokens=args.max_batch_tokens,
        show_progress=False,
    )
    lam, hs, source = load_tasks()
    rows, result = [], {}
    for name, task, n in (("LAMBADA", lam, args.lambada), ("HellaSwag", hs, args.hellaswag)):
        docs = take(task.examples(), n)
        task.examples = lambda docs=docs: iter(docs)  # read once; time scoring, not file parsing
        reqs = requests_of(task, docs, scorer)
        ours_ll = [s.logprob for s in scorer.loglikelihood(reqs)]
        peer_ll = harness_style(
            hf, reqs, args.batch_size, args.max_batch_tokens, 1024, tok.pad_token_id
        )
        diff = max(abs(a - b) for a, b in zip(ours_ll, peer_ll))
        if diff > 1e-2:
            raise RuntimeError(
                f"{name}: our scores and the harness-style peer's disagree (max |Δ| = {diff:.3g})"
            )
        times = interleaved(
            {
                "ours": lambda task=task, n=n: task.run(scorer, limit=n),
                "peer": lambda reqs=reqs, docs=docs, task=task: harness_style(
                    hf,
                    requests_of(task, docs, scorer),
                    args.batch_size,
                    args.max_batch_tokens,
                    1024,
                    tok.pad_token_id,
                ),
            },
            repeats=args.repeats,
            warmup=1,
        )
        n_tok = sum(len(c) + len(x) for c, x in reqs)
        eps = {k: len(docs) / median(v) for k, v in times.items()}
        ratio = eps["ours"] / eps["peer"]
        result[name] = {"examples_per_s": eps, "ratio": ratio, "max_abs_diff": diff}
        rows.append(
            [
                name,
                len(docs),
                len(reqs),
                n_tok,
                eps["ours"],
                spread(times["ours"]),
                eps["peer"],
                spread(times["peer"]),
                f"{ratio:.2f}×",
                f"{diff:.1e}",
            ]
        )

    print(
        machine_header(
            "Evaluation scoring: our Scorer vs harness-style transformers scoring, same weights",
            {
                "model": f"GPT-2-shaped, {args.layers} layers, d_model {args.d_model}, {args.heads} heads, vocab 50257, "
                f"random weights, fp32; batch ≤ {args.batch_size} requests / ≤ {args.max_batch_tokens} tokens",
                "items": source,
                "peer": "GPT2LMHeadModel(sdpa): logits at every position, log_softmax, gather (lm-eval HF recipe)",
                "timing": f"median of {args.repeats} interleaved repeats; ours = task.run (tokenise + score + metrics)",
            },
        )
    )
    print()
    print(
        table(
            [
                "task",
                "items",
                "requests",
                "tokens",
                "ours items/s",
                "spread",
                "peer items/s",
                "spread",
                "ours/peer",
                "max abs Δ logprob",
            ],
            rows,
        )
    )
    return result


if __name__ == "__main__":
    main()
