"""Where the commands write: ``src.inspect attention`` under its Hydra run directory, not the
current directory. (``src.train``'s console and last lines: tests/training/test_loggers.py;
``src.eval``'s: tests/evaluation/test_lm_eval.py; ``src.prepare``'s: tests/data/test_shards.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.mark.slow
def test_inspect_attention_writes_under_its_run_directory(
    tmp_path: Path, run_entry_point: Any
) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    model_dir = tmp_path / "tiny-gpt2"
    GPT2LMHeadModel(
        GPT2Config(vocab_size=50257, n_embd=32, n_layer=2, n_head=2, n_positions=64)
    ).save_pretrained(model_dir)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    r = run_entry_point(
        "src.inspect", ["attention", f"pretrained={model_dir}", "layers=[-1]", "heads=[0]"], cwd=cwd
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert [p.name for p in cwd.iterdir()] == ["outputs"]  # nothing in the current directory itself
    (maps,) = cwd.glob("outputs/inspect/*/*/attention_maps")
    assert sorted(p.name for p in maps.iterdir()) == ["attention.pt", "layer01.npy", "layer01.png"]
    # the last line names it
    assert r.stdout.strip().splitlines()[-1].strip().endswith("attention_maps/attention.pt")
