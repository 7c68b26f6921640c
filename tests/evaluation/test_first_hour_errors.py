"""A new user's mistakes at evaluation time (issue 26, items 3 and 4): a task path that does not
exist names the key and the resolved path before any model is loaded; a character outside a
char-level model's vocabulary names the character and where it is; a missing model source is one
ConfigError; the results table names its token count for what it counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from src.data.tokenizers import CharTokenizer
from src.errors import ConfigError, DataError
from src.evaluation.benchmarks.base import BenchmarkResult, build_benchmark
from src.evaluation.loading import load_model
from src.evaluation.suite import metrics_dict, results_table


def test_missing_task_path_names_key_and_resolved_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError) as e:
        build_benchmark("perplexity", {"type": "perplexity", "path": "valid.txt"})
    msg = str(e.value)
    assert "benchmarks.perplexity.path='valid.txt'" in msg
    assert str(tmp_path.resolve() / "valid.txt") in msg  # the resolved path
    (tmp_path / "valid.txt").write_text("some text\n")
    assert (
        build_benchmark("perplexity", {"type": "perplexity", "path": "valid.txt"}).path
        == "valid.txt"
    )


def test_unseen_character_names_character_position_and_line() -> None:
    tok = CharTokenizer().fit("abc\n")
    assert tok.encode("ab\nc") == [1, 2, 0, 3]
    with pytest.raises(DataError) as e:
        tok.encode("abc\nab=c€")
    msg = str(e.value)
    # the first unseen one
    assert "'='" in msg and "U+003D" in msg and "position 6" in msg and "line 2" in msg
    assert "replace" in msg  # the fix


def test_no_model_source_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="pretrained=.*ckpt_path="):
        load_model()


def test_results_count_tokens_read() -> None:
    result = BenchmarkResult(metrics={"loss": 1.0}, examples=3)
    result.tokens, result.seconds = 120, 2.0
    header = [c.header for c in results_table({"perplexity": result}).columns]
    assert "tokens read" in header and "tokens" not in header
    task = metrics_dict({"perplexity": result})["benchmarks"]["perplexity"]
    assert task["tokens_read"] == 120 and task["tokens_read_per_s"] == 60.0 and "tokens" not in task
