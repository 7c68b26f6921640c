"""Tokens/s has one definition (``RunSummary.tokens_per_s``): training tokens since training
started over its wall time, validation excluded; the last lines print it with the final losses."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from src.callbacks import summary as summary_module
from src.callbacks.summary import RunSummary
from src.training.console import final_figures


def test_validation_time_is_not_training_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # train start, val start, val end, (read), fit end
    clock = iter([100.0, 110.0, 115.0, 120.0, 130.0])
    monkeypatch.setattr(summary_module.time, "perf_counter", lambda: next(clock))
    trainer = SimpleNamespace(sanity_checking=False, callback_metrics={}, global_step=4)
    module = SimpleNamespace(tokens_seen=1000)  # a resumed run: 1000 tokens before this start
    s = RunSummary()
    s.on_train_start(trainer, module)  # t = 100
    module.tokens_seen = 1000 + 2000
    s.on_train_batch_end(trainer, module, None, None, 0)
    s.on_validation_start(trainer, module)  # t = 110
    s.on_validation_end(trainer, module)  # t = 115: 5 s of validation
    # t = 120, live (the progress bar)
    assert s.tokens_per_s == pytest.approx(2000 / (120 - 100 - 5))
    s.on_fit_end(trainer, module)  # t = 130
    assert s.train_time_s == pytest.approx(25.0) and s.tokens_per_s == pytest.approx(2000 / 25.0)


def test_final_figures() -> None:
    m = {
        "status": "completed",
        "val/loss": 2.19,
        "val/loss_best": 2.18,
        "best_step": 300,
        "test/loss": 2.2,
        "scored_weights": "best",
        "scored_step": 300,
        "throughput_tokens_per_s": 10496.4,
    }
    assert final_figures(m) == (
        "final: val/loss 2.1900 (best 2.1800 at step 300) · test/loss 2.2000 "
        "(best weights, step 300) · 10,496 tokens/s"
    )
    assert (
        final_figures({"status": "failed", "error": "ConfigError: x"})
        == "final: failed: ConfigError: x"
    )
    assert final_figures({}) == "final: no validation or test loss was computed"


def test_final_figures_of_a_synthetic_task_give_exact_match_at_each_length() -> None:
    m = {
        "test/loss": 0.0,
        "test/exact_match@64": 0.0,
        "test/exact_match@16": 1.0,
        "test/exact_match@32": None,  # NaN in metrics.json: a length the positions cannot reach
        "test/loss@32": 3.1,
    }
    assert final_figures(m) == (
        "final: test/loss 0.0000 · exact match 1.00 at length 16, – at length 32, 0.00 at length 64"
    )
