"""What the commands print and where they write: the last lines of ``src.train`` name the run
directory, metrics.json, checkpoints and logger files; no third-party tip or warning our setup
triggers; our own FLOPs in the model summary (never Lightning's "Total FLOPs: 0"); and
``src.inspect attention`` writes under its Hydra run directory, not the current directory."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

NOISE = ("💡", "litlogger", "LeafSpec", "Total FLOPs: 0", "Trainer already configured with model summary")


@pytest.mark.slow
def test_train_console_ends_with_where_results_went(tmp_path: Path, run_entry_point: Any, tiny_run: tuple[str, ...]) -> None:
    run = tmp_path / "run"
    args = [o for o in tiny_run if o != "trainer.enable_model_summary=false"]
    r = run_entry_point("src.train", [*args, "logger=[csv,tensorboard]", f"hydra.run.dir={run}"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    console = r.stdout + r.stderr
    for noise in NOISE:
        assert noise not in console, noise
    assert "Training FLOPs per token (forward + backward, T=32)" in console  # the model's own count
    tail = r.stdout.strip().splitlines()[-7:]
    assert tail[0] == "run completed; outputs:"
    listed = dict(line.split(":", 1) for line in tail[1:])
    assert Path(listed["run directory"].strip()) == run
    assert Path(listed["metrics"].strip()) == run / "metrics.json"
    for what in ("metrics", "best checkpoint", "last checkpoint", "CSV log", "TensorBoard"):
        assert Path(listed[what].strip()).exists(), what


@pytest.mark.slow
def test_inspect_attention_writes_under_its_run_directory(tmp_path: Path, run_entry_point: Any) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    model_dir = tmp_path / "tiny-gpt2"
    GPT2LMHeadModel(GPT2Config(vocab_size=50257, n_embd=32, n_layer=2, n_head=2, n_positions=64)).save_pretrained(model_dir)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    r = run_entry_point("src.inspect", ["attention", f"pretrained={model_dir}", "layers=[-1]", "heads=[0]"], cwd=cwd)
    assert r.returncode == 0, r.stderr[-3000:]
    assert [p.name for p in cwd.iterdir()] == ["outputs"]  # nothing in the current directory itself
    (maps,) = cwd.glob("outputs/inspect/*/*/attention_maps")
    assert sorted(p.name for p in maps.iterdir()) == ["attention.pt", "layer01.npy", "layer01.png"]
    assert r.stdout.strip().splitlines()[-1].strip().endswith("attention_maps/attention.pt")  # the last line names it
