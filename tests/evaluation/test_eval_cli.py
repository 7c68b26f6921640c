"""``python -m src.eval`` / ``src.generate``: configs compose, results equal the reference,
metrics.json is written, and mistakes are reported with the key to fix."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from src.evaluation.evaluate import build_benchmarks, evaluate

CONF = Path(__file__).resolve().parents[2] / "conf"


def eval_cfg(*overrides: str, name: str = "eval") -> DictConfig:
    common = ["progress=false", "device=cpu"] if name == "eval" else ["device=cpu"]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name=name, overrides=[*common, *overrides])


def test_every_task_config_composes_and_builds() -> None:
    names = sorted(p.stem for p in (CONF / "benchmarks").glob("*.yaml"))
    cfg = eval_cfg(f"benchmarks=[{','.join(names)}]")
    tasks = build_benchmarks(cfg.benchmarks)
    assert sorted(tasks) == names
    assert list(eval_cfg().benchmarks) == [
        "wikitext2",
        "lambada",
        "hellaswag",
    ]  # the default selection, in order


def test_generate_config_composes() -> None:
    cfg = eval_cfg(name="generate")
    assert cfg.max_new_tokens > 0 and cfg.pretrained is None


def test_eval_perplexity_equals_transformers(
    tiny_gpt2_dir, hf_model, hf_reference, text_file, tmp_path
) -> None:
    cfg = eval_cfg(
        f"pretrained={tiny_gpt2_dir}",
        "benchmarks=[perplexity]",
        f"benchmarks.perplexity.path={text_file}",
        "benchmarks.perplexity.context_length=64",
        "benchmarks.perplexity.stride=24",
    )
    metrics = evaluate(cfg, tmp_path)
    from src.data.tokenizers import build_tokenizer

    ids = build_tokenizer({"name": "gpt2"}).encode(text_file.read_text())
    nll, n = hf_reference.window_nll(hf_model, ids, 64, 24)
    assert metrics["perplexity/ppl"] == pytest.approx(math.exp(nll / n), rel=1e-4)
    assert metrics["perplexity/bits_per_byte"] == pytest.approx(
        nll / len(text_file.read_bytes()) / math.log(2), rel=1e-4
    )
    assert metrics["perplexity/word_ppl"] == pytest.approx(
        math.exp(nll / len(text_file.read_text().split())), rel=1e-4
    )
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert (
        written["status"] == "completed" and written["benchmarks"]["perplexity"]["tokens_read"] > 0
    )
    assert written["params"] == metrics["params"] and written["family"] == "decoder_only"
    words = len(text_file.read_text().split())
    details = written["benchmarks"]["perplexity"]
    assert details["words"] == words and details["tokens_per_word"] == pytest.approx(
        len(ids) / words
    )


def test_word_ppl_carries_a_note_with_the_tokens_per_word() -> None:
    """Issue 55: a word_ppl of 104 million on code was shown without a word on why: the table's
    caption says what it divides by and how many tokens one "word" is there."""
    from src.evaluation.benchmarks.base import BenchmarkResult
    from src.evaluation.suite import results_table

    code = BenchmarkResult(
        metrics={"ppl": 4.0, "word_ppl": 1.04e8},
        examples=1,
        details={"words": 10, "tokens_per_word": 13.3},
    )
    caption = str(results_table({"perplexity": code}).caption)
    assert "perplexity: word_ppl" in caption and "13.3 tokens per word" in caption
    assert "use ppl or bits_per_byte" in caption
    plain = BenchmarkResult(metrics={"acc": 0.5}, examples=1)
    assert results_table({"lambada": plain}).caption is None


def test_limit_takes_the_first_examples(
    tiny_gpt2_dir, lambada_jsonl, hellaswag_jsonl, tmp_path
) -> None:
    cfg = eval_cfg(
        f"pretrained={tiny_gpt2_dir}",
        "benchmarks=[lambada,hellaswag]",
        f"benchmarks.lambada.path={lambada_jsonl}",
        f"benchmarks.hellaswag.path={hellaswag_jsonl}",
        "limit=7",
    )
    metrics = evaluate(cfg)
    assert (
        metrics["benchmarks"]["lambada"]["examples"] == 7
        and metrics["benchmarks"]["hellaswag"]["examples"] == 7
    )
    assert 0.0 <= metrics["hellaswag/acc_norm"] <= 1.0


def test_mistakes_name_the_key_to_fix(tiny_gpt2_dir) -> None:
    with pytest.raises(ValueError, match="no benchmarks selected"):
        evaluate(eval_cfg(f"pretrained={tiny_gpt2_dir}", "benchmarks=[]"))
    with pytest.raises(ValueError, match="exactly one of pretrained"):
        evaluate(
            eval_cfg(
                "benchmarks=[lambada]", f"benchmarks.lambada.path={tiny_gpt2_dir / 'config.json'}"
            )
        )
    # checked before any model loads
    with pytest.raises(ValueError, match=r"benchmarks\.lambada\.path='x' does not exist"):
        evaluate(eval_cfg("benchmarks=[lambada]", "benchmarks.lambada.path=x"))
    with pytest.raises(ValueError, match=r"benchmarks\.perplexity\.path"):
        evaluate(eval_cfg(f"pretrained={tiny_gpt2_dir}", "benchmarks=[perplexity]"))
    with pytest.raises(FileNotFoundError, match="no tokenizer files"):
        from src.evaluation.loading import pretrained_tokenizer

        (tiny_gpt2_dir.parent / "llama").mkdir(exist_ok=True)
        (tiny_gpt2_dir.parent / "llama" / "config.json").write_text(
            '{"model_type": "llama", "vocab_size": 100}'
        )
        pretrained_tokenizer(str(tiny_gpt2_dir.parent / "llama"))


@pytest.mark.slow
def test_cli_end_to_end(tiny_gpt2_dir, lambada_jsonl, tmp_path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    run_dir = tmp_path / "run"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "src.eval",
            f"pretrained={tiny_gpt2_dir}",
            "benchmarks=[lambada]",
            f"benchmarks.lambada.path={lambada_jsonl}",
            "limit=5",
            "device=cpu",
            f"hydra.run.dir={run_dir}",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=CONF.parent,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "lambada" in out.stdout and "acc" in out.stdout
    assert (
        json.loads((run_dir / "metrics.json").read_text())["benchmarks"]["lambada"]["examples"] == 5
    )
    gen = subprocess.run(
        [
            sys.executable,
            "-m",
            "src.generate",
            f"pretrained={tiny_gpt2_dir}",
            "prompt='Hello'",
            "max_new_tokens=5",
            "greedy=true",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=CONF.parent,
        timeout=300,
    )
    assert gen.returncode == 0, gen.stderr
    assert gen.stdout.startswith("Hello") and len(gen.stdout.strip()) > len("Hello")
