"""Benchmark tasks: loaders (synthetic files and the shared benchmark copies) and scores
equal to references computed independently with the transformers model."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest

from src.evaluation.benchmarks import build_benchmark
from src.evaluation.benchmarks.hellaswag import capitalize_last_fragment, preprocess
from src.evaluation.scorer import Scorer

N = 50  # examples per parity check


def lambada_reference(hf_model, hf_reference, tok, path: Path) -> dict[str, float]:
    """lm-evaluation-harness lambada_openai, computed one passage at a time with transformers."""
    greedy, logprobs = [], []
    with path.open() as f:
        texts = [json.loads(line)["text"] for line, _ in zip(f, range(N))]
    for text in texts:
        cut = text.rindex(" ")
        context, target = text[:cut], text[cut:]  # target keeps its leading space
        whole = tok.encode(context + target)
        n_ctx = len(tok.encode(context))
        lp, g = hf_reference.loglikelihood(hf_model, whole[:n_ctx], whole[n_ctx:])
        greedy.append(g)
        logprobs.append(lp)
    return {"acc": sum(greedy) / len(texts), "ppl": math.exp(-sum(logprobs) / len(texts))}


def hellaswag_reference(hf_model, hf_reference, tok, docs) -> dict[str, float]:
    acc = acc_norm = 0
    for d in docs:
        lls = []
        for choice in d.choices:
            whole = tok.encode(d.context + " " + choice)
            n_ctx = len(tok.encode(d.context))
            lls.append(hf_reference.loglikelihood(hf_model, whole[:n_ctx], whole[n_ctx:])[0])
        acc += max(range(4), key=lambda i: lls[i]) == d.label
        acc_norm += max(range(4), key=lambda i: lls[i] / len(d.choices[i])) == d.label
    return {"acc": acc / len(docs), "acc_norm": acc_norm / len(docs)}


# -- LAMBADA ------------------------------------------------------------------------------
def test_lambada_matches_transformers(
    scorer: Scorer, hf_model, hf_reference, lambada_jsonl: Path
) -> None:
    result = build_benchmark("lambada", {"type": "lambada", "path": str(lambada_jsonl)}).run(
        scorer, limit=N
    )
    ref = lambada_reference(hf_model, hf_reference, scorer.tokenizer, lambada_jsonl)
    assert result.examples == N
    assert result.metrics["acc"] == ref["acc"]
    assert result.metrics["ppl"] == pytest.approx(ref["ppl"], rel=1e-4)


def test_lambada_shared_file_matches_transformers(
    scorer, hf_model, hf_reference, shared_file
) -> None:
    path = shared_file("lambada/lambada_test.jsonl")
    result = build_benchmark("lambada", {"type": "lambada", "path": str(path)}).run(scorer, limit=N)
    ref = lambada_reference(hf_model, hf_reference, scorer.tokenizer, path)
    assert result.metrics["acc"] == ref["acc"]
    assert result.metrics["ppl"] == pytest.approx(ref["ppl"], rel=1e-4)


def test_lambada_loader_reads_all_5153_records(shared_file) -> None:
    task = build_benchmark(
        "lambada", {"type": "lambada", "path": str(shared_file("lambada/lambada_test.jsonl"))}
    )
    docs = list(task.examples())
    assert len(docs) == 5153
    assert all(
        d.continuation.startswith(" ") and " " not in d.continuation[1:] and d.context for d in docs
    )
    assert docs[0].continuation == " signs" and docs[0].context.endswith("I don't care about")


# -- HellaSwag ----------------------------------------------------------------------------
def test_hellaswag_preprocessing_as_the_harness() -> None:
    assert (
        preprocess(" Fold the towel [title] Tuck the ends [step] in.  ")
        == "Fold the towel. Tuck the ends in."
    )
    assert (
        capitalize_last_fragment("Roof shingle removal: A man is sitting on a roof. he")
        == "Roof shingle removal: A man is sitting on a roof. He"
    )
    assert (
        capitalize_last_fragment("Baking: A woman stirs. The bowl")
        == "Baking: A woman stirs. The bowl"
    )
    assert capitalize_last_fragment("Baking: the woman") == "Baking: The woman"


def test_hellaswag_jsonl_matches_transformers(
    scorer: Scorer, hf_model, hf_reference, hellaswag_jsonl: Path
) -> None:
    task = build_benchmark("hellaswag", {"type": "hellaswag", "path": str(hellaswag_jsonl)})
    docs = list(task.examples())[:N]
    assert (
        docs[0].context
        == "Activity 0: The cat sat on the mat and looked at the garden. Then the man"
    )
    result = task.run(scorer, limit=N)
    ref = hellaswag_reference(hf_model, hf_reference, scorer.tokenizer, docs)
    assert result.examples == N
    assert result.metrics["acc"] == ref["acc"] and result.metrics["acc_norm"] == ref["acc_norm"]


def test_hellaswag_shared_file_matches_transformers(
    scorer, hf_model, hf_reference, shared_file
) -> None:
    path = shared_file("hellaswag_val/hellaswag_val_full.txt.bz2")
    task = build_benchmark("hellaswag", {"type": "hellaswag", "path": str(path)})
    docs = list(task.examples())[:N]
    result = task.run(scorer, limit=N)
    ref = hellaswag_reference(hf_model, hf_reference, scorer.tokenizer, docs)
    assert result.metrics["acc"] == ref["acc"] and result.metrics["acc_norm"] == ref["acc_norm"]


def test_hellaswag_loader_reads_all_10042_items(shared_file) -> None:
    task = build_benchmark(
        "hellaswag",
        {"type": "hellaswag", "path": str(shared_file("hellaswag_val/hellaswag_val_full.txt.bz2"))},
    )
    docs = list(task.examples())
    assert len(docs) == 10042
    assert all(len(d.choices) == 4 and d.context and all(d.choices) for d in docs)
    assert Counter(d.label for d in docs) == {0: 2515, 1: 2485, 2: 2584, 3: 2458}
    assert docs[0].context == "Roof shingle removal: A man is sitting on a roof. He"
    assert docs[0].choices[3] == "starts pulling up roofing on a roof." and docs[0].label == 3


# -- perplexity and translation sources -------------------------------------------------------
def test_perplexity_reads_wikitext2_lines(shared_file) -> None:
    task = build_benchmark(
        "wikitext2", {"type": "perplexity", "path": str(shared_file("wikitext2/test.txt"))}
    )
    text, rows = task.text()
    # lines and whitespace tokens, as SOURCE.txt counts
    assert rows == 4358 and len(text.split()) == 241211
    assert task.text(limit=10)[1] == 10


def test_translation_reads_multi30k_test(shared_file) -> None:
    folder = shared_file("multi30k_en_de")
    src, ref = build_benchmark("translation", {"type": "translation", "path": str(folder)}).pairs()
    assert len(src) == len(ref) == 1000
    assert src[0] == "A man in an orange hat starring at something."


def test_corpus_scores_are_sacrebleu_scale() -> None:
    from src.evaluation.benchmarks.translation import corpus_scores

    refs = ["Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt."]
    assert corpus_scores(refs, refs) == pytest.approx({"bleu": 100.0, "chrf": 100.0})
    assert corpus_scores(["Hallo Welt"], refs)["bleu"] < 5


def test_unknown_benchmark_type_and_key_fail_loudly() -> None:
    with pytest.raises(Exception, match="registered: hellaswag, lambada, perplexity, translation"):
        build_benchmark("mine", {"type": "nope"})
    with pytest.raises(
        Exception,
        match=r"benchmarks\.lambada\.pth='x' is not a key of benchmarks\.lambada \(type lambada\) "
        r"\(did you mean benchmarks\.lambada\.path\?\)",
    ):
        build_benchmark("lambada", {"type": "lambada", "pth": "x"})


def test_perplexity_on_a_data_source_and_on_token_bins(
    scorer: Scorer, hf_model, hf_reference, text_file, tmp_path
) -> None:
    from src.data.cache import write_token_dir

    text = text_file.read_text()
    by_source = build_benchmark(
        "p",
        {
            "type": "perplexity",
            "source": {"name": "text", "paths": [str(text_file)], "val_paths": [str(text_file)]},
            "split": "val",
            "context_length": 64,
            "stride": 32,
        },
    ).run(scorer)
    ids = scorer.tokenizer.encode(text)
    nll, n = hf_reference.window_nll(hf_model, ids, 64, 32)
    assert by_source.metrics["ppl"] == pytest.approx(math.exp(nll / n), rel=1e-4)

    write_token_dir(
        {"train": [text], "val": [text], "test": [text]},
        scorer.tokenizer,
        tmp_path / "bins",
        source="text",
        separate=False,
    )
    task = build_benchmark(
        "owt",
        {
            "type": "perplexity",
            "source": {"name": "bin", "dir": str(tmp_path / "bins")},
            "split": "val",
            "context_length": 64,
            "stride": 32,
        },
    )
    by_bin = task.run(scorer)
    assert (
        by_bin.metrics["ppl"] == pytest.approx(by_source.metrics["ppl"], rel=1e-6)
        and "bits_per_byte" not in by_bin.metrics
    )
    # two 64-token blocks: every token but the first
    assert task.run(scorer, limit=2).details["tokens_scored"] == 127
