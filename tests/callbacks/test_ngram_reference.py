"""NgramReference on a real (tiny) run: it scores exactly the tokens the validation and test
loops saw, and its numbers are the Kneser-Ney model's on those tokens."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from src.evaluation.ngram import KneserNey
from tests.training.conftest import TINY, train_in_process


def test_ngram_reference_scores_the_runs_own_batches(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cache = tmp_path / "ngram_cache"
    train_in_process(
        [
            *TINY,
            "+callbacks.ngram._target_=src.callbacks.ngram_reference.NgramReference",
            "+callbacks.ngram.orders=[1,3]",
            f"+callbacks.ngram.output_dir={run}",
            f"+callbacks.ngram.cache_dir={cache}",
        ],
        run,
    )
    ref = json.loads((run / "ngram.json").read_text())
    metrics = json.loads((run / "metrics.json").read_text())
    assert ref["orders"] == [1, 3] and set(ref["val"]) == set(ref["test"]) == {"1", "3"}
    # 2 batches x 4 x T
    assert ref["val"]["3"]["tokens"] == 2 * 4 * 32 and ref["test"]["3"]["tokens"] == 2 * 4 * 32
    assert ref["val"]["3"]["loss"] < ref["val"]["1"]["loss"] and metrics["status"] == "completed"
    # the same numbers from the model fitted here on the training split, scored on the first val windows
    from src.data.datamodule import build_datamodule
    from src.data.tokenizers import build_tokenizer

    dm = build_datamodule(
        {"name": "embedded"}, build_tokenizer({"name": "char"}), block_size=32, batch_size=4, seed=0
    )
    dm.prepare_tokenizer()
    dm.setup("fit")
    val = np.asarray(dm.tokens["val"])
    windows = [val[j * 32 : j * 32 + 33] for j in range(8)]
    corpus = dm.reference_corpus()
    model = KneserNey(3, ref["vocab_size"]).fit(corpus.sequences, start=corpus.start)
    assert model.nll(windows, 3) == (pytest.approx(ref["val"]["3"]["loss"], rel=1e-12), 256)
    # val and test results cached by content
    assert len(list((cache / "ngram").glob("*.json"))) == 2
