"""Train the study's byte-level BPE tokenizer (2,000 tokens) on the Multi30k training pairs (en + de).

GPT-2's 50,257-token vocabulary would make the output layer ~95% of a 1M-parameter model's
compute on CPU, and the char tokenizer has no eos/pad (needed for pairs); a small BPE fitted
on the training text keeps sentences at ~15-20 tokens per side. Offline, deterministic, ~2 s:

    python experiments/03_families/build_tokenizer.py [--data ../shared/data/multi30k_en_de] [--out DIR]

Writes a transformers tokenizer (tokenizer.json + config) that ``tokenizer=hf tokenizer.path=DIR`` loads.
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="../shared/data/multi30k_en_de")
    p.add_argument("--out", default=str(HERE / "tokenizer"))
    p.add_argument("--vocab-size", type=int, default=2000)
    args = p.parse_args()

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    lines: list[str] = []
    for lang in ("en", "de"):
        with gzip.open(Path(args.data) / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
            lines += [line.rstrip("\n") for line in f]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=args.vocab_size,
        min_frequency=2,
        special_tokens=["<pad>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>")
    fast.save_pretrained(args.out)
    n = sum(len(tok.encode(x).ids) for x in lines[:2000]) / 2000
    print(f"wrote {args.out}: {len(fast)} tokens, {n:.1f} tokens per sentence on average")


if __name__ == "__main__":
    main()
