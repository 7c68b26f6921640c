"""Issue 21 item 14: ``python -m src.report extrapolation`` on a missing path or a torn checkpoint is one line
naming it (exit status 2), never a traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from src.report import main
from tests.training.conftest import TINY, train_in_process


def _one_line(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as info:
        main(["extrapolation", *args])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    return err


def test_a_missing_path_and_a_torn_checkpoint_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRANSFORMER_LAB_CACHE", str(tmp_path / "cache"))
    assert str(tmp_path / "nowhere") in _one_line(capsys, str(tmp_path / "nowhere"))
    run = tmp_path / "run"
    train_in_process([*TINY, "trainer.max_steps=2", "test=false"], run)
    capsys.readouterr()  # the training's own output (a stale capture stream's logging errors included) is not the CLI's
    torn = tmp_path / "torn.ckpt"
    shutil.copy(run / "checkpoints" / "last.ckpt", torn)
    with open(torn, "r+b") as f:
        f.truncate(torn.stat().st_size // 2)
    err = _one_line(capsys, str(torn))
    assert str(torn) in err and "CheckpointError" in err
