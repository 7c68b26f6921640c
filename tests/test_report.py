"""``python -m src.report``'s subcommands: ``extrapolation`` on a trained run (the ``scaling`` one is in
tests/reporting/test_scaling.py, the comparison in tests/reporting/test_protocol_report.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from src.report import SUBCOMMANDS, main
from tests.training.conftest import TINY, train_in_process


def test_extrapolation_scores_a_run_and_records_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRANSFORMER_LAB_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    train_in_process([*TINY, "model/position=rope", "test=false"], run)
    results = main(["extrapolation", str(run), "--factors", "1", "2", "--max-tokens", "256"])
    assert [r.factor for r in results] == [1, 2] and all(
        r.loss is not None and r.loss > 0 for r in results
    )
    out = capsys.readouterr().out
    # the last line says where it went
    assert "trained at 32 tokens" in out and f"in {run / 'metrics.json'}" in out
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["extrapolation/loss@2x"] == pytest.approx(results[1].loss)
    assert (run / "extrapolation.json").is_file()


def test_extrapolation_on_a_missing_run_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["extrapolation", str(tmp_path / "nowhere")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert (
        "python -m src.report extrapolation" in err and "nowhere" in err and "Traceback" not in err
    )


def test_a_first_argument_picks_a_subcommand_else_the_comparison() -> None:
    assert set(SUBCOMMANDS) == {"scaling", "extrapolation"}
    # a directory that holds no runs: the comparison's own error
    with pytest.raises(SystemExit) as exit_info:
        main(["/nonexistent-sweep"])
    assert exit_info.value.code == 2
