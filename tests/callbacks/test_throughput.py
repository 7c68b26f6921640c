"""TokenThroughput: timed (synchronising) updates only on logging steps, counts on every step,
and tokens/s + MFU figures that agree with the counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from src.checkpoints.load import load_checkpoint
from tests.training.conftest import TINY, read_csv_metrics, series, train_in_process


def test_timed_updates_only_on_logging_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lightning.fabric.utilities.throughput import Throughput

    timed: list[int] = []
    real_update = Throughput.update

    def spy(self, *, time, batches, samples, lengths=None, flops=None):  # noqa: ANN001
        timed.append(batches)
        return real_update(
            self, time=time, batches=batches, samples=samples, lengths=lengths, flops=flops
        )

    monkeypatch.setattr(Throughput, "update", spy)
    run_dir = tmp_path / "run"
    overrides = [
        o
        for o in TINY
        if not o.startswith(
            ("trainer.max_steps", "trainer.log_every_n_steps", "trainer.val_check_interval")
        )
    ]
    train_in_process(
        [
            *overrides,
            "trainer.max_steps=12",
            "trainer.log_every_n_steps=3",
            "trainer.val_check_interval=12",
            "callbacks.throughput.window_size=6",
            "+callbacks.throughput.peak_tflops=1.0",
        ],
        run_dir,
    )
    train_timed = [b for b in timed if b in (3, 6, 9, 12)]
    assert train_timed[:4] == [
        3,
        6,
        9,
        12,
    ]  # one timed update per logging step, cumulative batch counts
    # validation batches (<= 2 per run) aside, none in between
    assert all(b % 3 == 0 for b in timed if b > 2)

    rows = read_csv_metrics(run_dir)
    tok_s = series(rows, "train/device/items_per_sec")
    mfu = series(rows, "train/device/mfu")
    flops_s = series(rows, "train/device/flops_per_sec")
    assert tok_s and mfu and flops_s, sorted({k for r in rows for k, v in r.items() if v})
    step = max(tok_s)
    assert tok_s[step] > 0
    assert mfu[step] == pytest.approx(flops_s[step] / 1e12, rel=1e-6)  # peak 1 TFLOP/s
    # FLOPs cover every batch, not only the timed ones: per token they are the model's training count
    # (3 × model.forward_flops for batch 4 × T 32), within a few % of nanoGPT's 6N + 12·L·H·Q·T
    # (N without the 32×32 position table; L=2, H=2, Q=16, T=32), which also counts biases and norms
    model = load_checkpoint(run_dir / "checkpoints" / "last.ckpt").model
    per_token = model.training_flops(4, 32) / (4 * 32)
    assert flops_s[step] / tok_s[step] == pytest.approx(per_token, rel=1e-3)
    params = json.loads((run_dir / "metrics.json").read_text())["params"]
    assert per_token == pytest.approx(6 * (params - 32 * 32) + 12 * 2 * 2 * 16 * 32, rel=0.05)


def test_progress_bar_updates_at_most_refresh_rate_per_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The training bar's counter and metrics are redrawn at most ``refresh_rate`` times a second,
    and always at the last step; tokens are counted on every batch."""
    from types import SimpleNamespace

    from lightning.pytorch.callbacks import RichProgressBar

    from src.callbacks import throughput

    drawn: list[int] = []
    monkeypatch.setattr(
        RichProgressBar, "on_train_batch_end", lambda self, tr, pm, out, batch, i: drawn.append(i)
    )
    clock = {"t": 100.0}
    monkeypatch.setattr(throughput.time, "perf_counter", lambda: clock["t"])
    bar = throughput.TokensPerSecondBar(refresh_rate=4)  # at most every 0.25 s
    module = SimpleNamespace(tokens_per_batch=10)
    bar._t0 = clock["t"]
    for i in range(20):  # 20 steps of 1/16 s (exact in binary)
        trainer = SimpleNamespace(is_last_batch=False, max_steps=20, global_step=i + 1)
        bar.on_train_batch_end(trainer, module, None, None, i)
        clock["t"] += 0.0625
    assert drawn == [
        0,
        4,
        8,
        12,
        16,
        19,
    ]  # the first, then every 0.25 s, and the last step (global_step = max_steps)
    assert bar._tokens == 200
