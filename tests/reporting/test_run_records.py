"""Issue 21 items 7, 9 (overrides.yaml) and 14 (a sweep's runs): records that would go wrong silently, or
end in a traceback, are refused by ``python -m src.report`` with one line naming the run or the file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from src.report import main
from tests.reporting.fake_runs import completed, write_run


def sweep(root: Path) -> Path:
    """Two variants x two seeds, each with a validation curve."""
    for seed in (1, 2):
        for ffn, shift in (("gelu", 0.0), ("relu", 0.1)):
            write_run(
                root,
                [f"model/ffn={ffn}", f"seed={seed}"],
                metrics=completed(2.0 + shift + seed / 100, 2.1 + shift),
                val_history=[(10, 2.5), (20, 2.2)],
            )
    return root


def report_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    return err


def test_the_sweep_reports_when_nothing_is_wrong(tmp_path: Path) -> None:
    files = main([str(sweep(tmp_path / "s"))])
    assert len(files.runs) == 4


def test_a_copied_run_is_refused_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = sweep(tmp_path / "s")
    shutil.copytree(root / "model.ffn=gelu,seed=1", root / "copy")
    err = report_error(capsys, str(root))
    assert (
        str(root / "copy") in err and str(root / "model.ffn=gelu,seed=1") in err and "seed=1" in err
    )


def test_a_sweep_given_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = sweep(tmp_path / "a")
    rerun = sweep(tmp_path / "b")  # the same sweep run again elsewhere
    err = report_error(capsys, str(first), str(rerun), "--out", str(tmp_path / "out"))
    assert "same run twice" in err and str(first) in err and str(rerun) in err
    assert not (tmp_path / "out" / "report.md").exists()


def test_a_file_only_override_does_not_make_a_second_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = sweep(tmp_path / "s")
    write_run(
        root,
        ["model/ffn=gelu", "seed=1", "trainer.enable_progress_bar=false"],
        metrics=completed(2.0, 2.1),
        name="again",
    )
    assert "again" in report_error(capsys, str(root))


def _tokenizer(run: Path, node: dict[str, str]) -> None:
    cfg = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())
    cfg["tokenizer"] = node
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(cfg))


def test_losses_of_two_tokenizers_are_not_one_metric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = sweep(tmp_path / "s")
    for seed in (1, 2):
        _tokenizer(root / f"model.ffn=gelu,seed={seed}", {"name": "char"})
        _tokenizer(root / f"model.ffn=relu,seed={seed}", {"name": "gpt2"})
    err = report_error(capsys, str(root))
    assert (
        "tokenizer=char" in err
        and "tokenizer=gpt2" in err
        and "test/loss" in err
        and "bits_per_byte" in err
    )
    assert str(root / "model.ffn=gelu,seed=1") in err and str(root / "model.ffn=relu,seed=1") in err
    # per byte: one unit across tokenizers
    files = main([str(root), "--metric", "perplexity/bits_per_byte"])
    assert files.markdown.is_file()


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ('- model/ffn=gelu\n- "seed=', "cannot be parsed"),
        ("model/ffn: gelu\n", "not a list"),
        ("- 3\n", "not a list"),
    ],
)
def test_a_torn_or_non_list_overrides_yaml_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, what: str
) -> None:
    root = sweep(tmp_path / "s")
    path = root / "model.ffn=gelu,seed=1" / ".hydra" / "overrides.yaml"
    path.write_text(text)
    err = report_error(capsys, str(root))
    assert str(path) in err and what in err


def test_a_missing_overrides_yaml_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = sweep(tmp_path / "s")
    path = root / "model.ffn=relu,seed=2" / ".hydra" / "overrides.yaml"
    path.unlink()
    assert str(path) in report_error(capsys, str(root))


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ('{"status": "compl', "not valid JSON"),
        ("[1, 2]", "JSON list"),
        ("\udcff", "cannot be read"),
    ],
)
def test_a_torn_metrics_json_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, what: str
) -> None:
    root = sweep(tmp_path / "s")
    path = root / "model.ffn=gelu,seed=2" / "metrics.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    err = report_error(capsys, str(root))
    assert str(path) in err and what in err


def test_a_bad_cell_in_a_runs_csv_names_the_file_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = sweep(tmp_path / "s")
    path = root / "model.ffn=relu,seed=1" / "csv" / "version_0" / "metrics.csv"
    path.write_text(path.read_text().replace("2.5", "abc"))
    err = report_error(capsys, str(root))
    assert str(path) in err and "line 2" in err and "val/loss" in err and "'abc'" in err


def test_the_row_a_running_job_is_writing_is_not_an_error(tmp_path: Path) -> None:
    root = sweep(tmp_path / "s")
    path = root / "model.ffn=relu,seed=1" / "csv" / "version_0" / "metrics.csv"
    path.write_text(path.read_text() + "29,,2.1e")  # no newline yet: Lightning is writing this row
    assert len(main([str(root)]).runs) == 4
