"""Data pipeline throughput: GPT-2 tokenisation (tiktoken, several threads) and the
training data loader, each against what a training step consumes.

* tokenisation: ``GPT2Tokenizer.encode_batch`` (tiktoken) over documents of a real corpus
  (``../shared/data`` WikiText-2 when present, else Python's bundled help texts), at 1, 2,
  4 … threads;
* loader: ``LMDataModule`` (the ``text`` source over the same corpus, token cache on disk)
  walking its training loader — random windows ``{"tokens": [B, T+1]}``;
* consumption: tokens/s of one training step (forward + backward + AdamW) of our
  GPT-2-shaped model at the same ``B`` and ``T``, measured interleaved with the loader.

    python perf/data.py            # 4 layers, d 256, B 4, T 256 (~1 min)
    python perf/data.py --quick    # smoke run
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch  # noqa: E402

from perf.common import (  # noqa: E402
    SHARED_DATA,
    add_shape_args,
    base_parser,
    gpt2_config_dict,
    interleaved,
    machine_header,
    median,
    setup,
    spread,
    table,
    verdict,
)

TARGET = 20.0  # loader tokens/s over training tokens/s


def parse_args(argv: list[str] | None = None):
    p = base_parser(__doc__.split("\n")[0])
    add_shape_args(p, batch=4)
    p.add_argument("--loader-batches", type=int, default=200, help="batches drawn per timed repeat")
    p.add_argument("--max-chars", type=int, default=2_500_000, help="corpus characters to tokenise")
    p.add_argument("--threads-list", default="1,2,4,8", help="tiktoken thread counts")
    args = p.parse_args(argv)
    if args.quick:
        args.layers, args.d_model, args.heads, args.seq_len, args.batch = 2, 64, 4, 64, 2
        args.loader_batches, args.max_chars, args.threads_list = 20, 100_000, "1,2"
    args.repeats = args.repeats or (3 if args.quick else 5)
    return args


def corpus(max_chars: int) -> tuple[str, list[str]]:
    """(description, documents): WikiText-2 valid+test from shared data, else pydoc topics."""
    files = [SHARED_DATA / "wikitext2" / f for f in ("valid.txt", "test.txt")]
    if all(f.exists() for f in files):
        text = "".join(f.read_text(encoding="utf-8") for f in files)[:max_chars]
        docs = [d for d in text.split("\n \n") if d.strip()]
        return f"WikiText-2 valid+test ({len(text):,} chars, {len(docs):,} documents)", docs
    from pydoc_data.topics import topics

    docs, n = [], 0
    while n < max_chars:
        for v in topics.values():
            docs.append(v)
            n += len(v)
            if n >= max_chars:
                break
    return f"pydoc topics ({n:,} chars, {len(docs):,} documents; shared data absent)", docs


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    setup(args)
    from src.data.datamodule import build_datamodule
    from src.data.tokenizers import build_tokenizer
    from src.models import build_model

    desc, docs = corpus(args.max_chars)
    tok = build_tokenizer({"name": "gpt2"})
    n_tokens = sum(len(x) for x in tok.encode_batch(docs, num_threads=1))
    n_bytes = sum(len(d.encode()) for d in docs)
    threads = [int(t) for t in args.threads_list.split(",")]
    tok_times = interleaved(
        {t: (lambda t=t: tok.encode_batch(docs, num_threads=t)) for t in threads},
        repeats=args.repeats,
        warmup=0,
    )

    # the loader, over a token cache of the same corpus
    with tempfile.TemporaryDirectory() as tmp:
        corpus_file = Path(tmp) / "corpus.txt"
        corpus_file.write_text("\n\n".join(docs), encoding="utf-8")
        dm = build_datamodule(
            {
                "name": "text",
                "paths": [str(corpus_file)],
                "cache_dir": str(Path(tmp) / "cache"),
                "val_fraction": 0.1,
            },
            tok,
            block_size=args.seq_len,
            batch_size=args.batch,
            seed=0,
        )
        t0 = time.perf_counter()
        dm.prepare_data()
        dm.setup("fit")
        cache_s = time.perf_counter() - t0
        loader = iter(dm.train_dataloader())

        def draw() -> None:
            for _ in range(args.loader_batches):
                b = next(loader)
            assert b["tokens"].shape == (args.batch, args.seq_len + 1)

        model = build_model(
            gpt2_config_dict(args.layers, args.d_model, args.heads, args.seq_len)
        ).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        batch = next(loader)["tokens"]  # [B, T+1]

        def train_step() -> None:
            loss = model(batch[:, :-1], labels=batch).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        times = interleaved({"loader": draw, "train": train_step}, repeats=args.repeats, warmup=1)
    tokens_per_batch = args.batch * args.seq_len  # targets per batch (what training counts)
    loader_tps = args.loader_batches * tokens_per_batch / median(times["loader"])
    train_tps = tokens_per_batch / median(times["train"])

    print(
        machine_header(
            "Data pipeline: tokenisation and loader vs training consumption",
            {
                "corpus": desc,
                "tokeniser": f"GPT-2 BPE via tiktoken, encode_ordinary_batch; {n_tokens:,} tokens",
                "loader": f"LMDataModule(text source), B {args.batch}, T {args.seq_len}, num_workers 0, "
                f"{args.loader_batches} batches per repeat; token cache built in {cache_s:.1f} s",
                "training step": f"our GPT-2-shaped model, {args.layers} layers, d_model {args.d_model}, vocab 50257, "
                f"forward + backward + AdamW, fp32",
                "timing": f"median of {args.repeats} interleaved repeats",
            },
        )
    )
    print()
    rows = [
        [
            f"tiktoken, {t} thread(s)",
            n_tokens / median(v),
            n_bytes / median(v) / 2**20,
            spread(v),
            n_tokens / median(v) / train_tps,
        ]
        for t, v in tok_times.items()
    ]
    rows.append(
        [
            "train loader (batches)",
            loader_tps,
            float("nan"),
            spread(times["loader"]),
            loader_tps / train_tps,
        ]
    )
    rows.append(["training step (consumes)", train_tps, float("nan"), spread(times["train"]), 1.0])
    print(table(["stage", "tokens/s", "MiB/s", "spread", "× training"], rows))
    print()
    ratio = loader_tps / train_tps
    tok_ratio = max(n_tokens / median(v) for v in tok_times.values()) / train_tps
    print(f"loader vs training consumption:       {verdict(ratio, TARGET)}")
    print(f"tokenisation vs training consumption: {verdict(tok_ratio, TARGET)}")
    return {"loader_ratio": ratio, "tokenizer_ratio": tok_ratio, "train_tokens_per_s": train_tps}


if __name__ == "__main__":
    main()
