"""A hybrid stack of every mixer resumes after a crash exactly as the uninterrupted run: the same
losses after the checkpoint and the same final weights, bit for bit."""

from __future__ import annotations

import json
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch

from src.training import runner
from tests.training.conftest import TINY, read_csv_metrics, series, train_in_process

EVERY_MIXER = [
    "model.n_layer=5",
    "model/mixer=linear_attention",
    "model.mixer.chunk_size=8",
    "model.layer_mixers=[linear_attention,short_conv,mamba2,gated_deltanet,attention]",
]


class CrashAt(pl.Callback):
    """Raises at the start of ``step`` (a killed job)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer: pl.Trainer, *args: object) -> None:
        if trainer.global_step == self.step:
            raise RuntimeError(f"simulated crash at step {self.step}")


def test_every_mixer_hybrid_resumes_after_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    common = [*TINY, *EVERY_MIXER, "trainer.max_steps=6", "trainer.val_check_interval=3", "seed=7"]
    full_dir, crash_dir, resume_dir = tmp_path / "full", tmp_path / "crash", tmp_path / "resume"
    train_in_process(common, full_dir)
    build = runner.build_trainer
    monkeypatch.setattr(
        runner,
        "build_trainer",
        lambda cfg, extra_callbacks=(): build(cfg, [*extra_callbacks, CrashAt(4)]),
    )
    with pytest.raises(RuntimeError, match="simulated crash at step 4"):
        train_in_process(common, crash_dir)
    monkeypatch.setattr(runner, "build_trainer", build)
    last = crash_dir / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 3
    train_in_process([*common, f"ckpt_path={last}"], resume_dir)

    full = series(read_csv_metrics(full_dir), "train/loss")
    resumed = series(read_csv_metrics(resume_dir), "train/loss")
    assert sorted(resumed) == [s for s in sorted(full) if s >= 3]
    for step, loss in resumed.items():
        assert loss == full[step], f"train/loss at step {step}"  # bit for bit
    m = json.loads((resume_dir / "metrics.json").read_text())
    assert m["status"] == "completed" and m["global_step"] == 6
    a = torch.load(full_dir / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    b = torch.load(resume_dir / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    assert any(".attn.A_log" in k for k in a)  # the Mamba-2 / Gated DeltaNet layers are there
    for k in a:
        assert torch.equal(a[k], b[k]), k
