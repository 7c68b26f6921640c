"""python -m src.studies.export: a sweep's finished jobs, without checkpoints, into a study's runs/ and back."""

from __future__ import annotations

from pathlib import Path

import pytest

from src.report import make_report
from src.studies import export as ex
from tests.reporting.fake_runs import completed, write_run


def sweep(root: Path) -> Path:
    for seed in (1, 2):
        for ffn in ("gelu", "swiglu"):
            run = write_run(
                root,
                [f"model/ffn={ffn}", f"seed={seed}"],
                metrics=completed(2.0 + seed / 10, 2.1 + seed / 10),
                val_history=[(10, 2.5)],
                budget={"flops_per_token": 10.0},
            )
            (run / "checkpoints").mkdir()
            (run / "checkpoints" / "last.ckpt").write_bytes(b"x" * 1000)
            (run / ".sweep_job.json").write_text("{}")
            (run / "attempts" / "1").mkdir(parents=True)
            (run / "attempts" / "1" / "metrics.json").write_text("{}")
    write_run(root, ["model/ffn=geglu", "seed=1"], metrics=None)  # still running: no metrics.json
    return root


def test_export_keeps_the_small_files_of_finished_jobs_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dest = sweep(tmp_path / "sweep"), tmp_path / "runs"
    assert ex.main([str(src), str(dest)]) == 0
    assert "exported 4 finished jobs" in capsys.readouterr().out
    jobs = sorted(p.name for p in dest.iterdir())
    assert jobs == [
        "model.ffn=gelu,seed=1",
        "model.ffn=gelu,seed=2",
        "model.ffn=swiglu,seed=1",
        "model.ffn=swiglu,seed=2",
    ]
    kept = {
        p.relative_to(dest / jobs[0]).as_posix() for p in (dest / jobs[0]).rglob("*") if p.is_file()
    }
    assert kept == {
        ".hydra/config.yaml",
        ".hydra/overrides.yaml",
        ".hydra/hydra.yaml",
        "metrics.json",
        ".sweep_job.json",
        "budget.json",
        "csv/version_0/metrics.csv",
    }
    assert not list(dest.rglob("*.ckpt")) and not list(dest.rglob("attempts"))
    # the report recomputes from the exported files alone, with the same numbers
    a, b = make_report([src], tmp_path / "a"), make_report([dest], tmp_path / "b")
    # not the job still running
    finished = [(r.label, r.primary.mean) for r in a.report.rows if r.primary.n]
    assert finished == [(r.label, r.primary.mean) for r in b.report.rows] and len(finished) == 2


def test_restore_never_overwrites_and_refuses_big_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, runs, again = sweep(tmp_path / "sweep"), tmp_path / "runs", tmp_path / "again"
    ex.export(src, runs)
    job = "model.ffn=gelu,seed=1"
    (again / job).mkdir(parents=True)
    (again / job / "metrics.json").write_text('{"mine": 1}')
    copied, kept = ex.restore(runs, again)
    assert kept == 1 and copied > 20
    assert (again / job / "metrics.json").read_text() == '{"mine": 1}'
    assert (again / job / ".hydra" / "config.yaml").is_file()
    monkeypatch.setattr(ex, "MAX_FILE_BYTES", 10)
    with pytest.raises(ValueError, match="not a small file"):
        ex.export(src, tmp_path / "runs2")
    assert ex.main([str(tmp_path / "nowhere"), str(tmp_path / "x")]) == 2


def test_export_merges_study_commands_from_several_sweeps_without_repeats(tmp_path: Path) -> None:
    """A sweep restored from runs/ holds the committed commands plus its own; a second sweep directory holds only
    its own. Exporting both, in either order and twice, keeps every entry once: the committed ones first."""
    runs, a, b = tmp_path / "runs", tmp_path / "a", tmp_path / "b"
    for d in (runs, a, b):
        d.mkdir()
    committed = "# 2026-01-01 00:00:00\npython -m src.train -m seed=0\n"
    (runs / "study_commands.sh").write_text(committed)
    ex.restore(runs, a)
    with (a / "study_commands.sh").open("a") as f:
        f.write("# 2026-01-02 00:00:00\npython -m src.train -m seed=1\n")
    (b / "study_commands.sh").write_text(
        "# 2026-01-02 00:00:00\npython -m src.train -m seed=2 hydra.sweep.dir=b"
    )  # no final newline
    for sweep_dir in (b, a, b, a):
        ex.export(sweep_dir, runs)
    text = (runs / "study_commands.sh").read_text()
    assert text.startswith(committed) and text.endswith("\n")
    assert [text.count(f"seed={n}") for n in range(3)] == [1, 1, 1]
    assert ex.command_entries(text) == [
        committed,
        "# 2026-01-02 00:00:00\npython -m src.train -m seed=2 hydra.sweep.dir=b\n",
        "# 2026-01-02 00:00:00\npython -m src.train -m seed=1\n",
    ]
    assert ex.merge_commands(a / "study_commands.sh", runs / "study_commands.sh") == 0
