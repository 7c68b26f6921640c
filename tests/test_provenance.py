"""metrics.json's provenance: the commit, a dirty tree and its diff's hash, versions, the device; the
report's warning when the runs of one study differ."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from src import provenance as prov


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    _git(tmp_path, "add", "a.py")
    _git(tmp_path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one")
    monkeypatch.setattr(prov, "REPO", tmp_path)
    prov.code_state.cache_clear()
    yield tmp_path
    prov.code_state.cache_clear()


def test_a_clean_then_a_dirty_tree(repo: Path) -> None:
    record = prov.provenance()
    assert set(record) == set(prov.FIELDS)
    assert record["git_commit"] == _git(repo, "rev-parse", "HEAD") and record["git_dirty"] is False
    assert record["git_diff_sha256"] is None
    assert record["python"] and record["torch"] and record["lightning"] and record["hydra"]
    assert record["gpu_count"] == 0 or record["gpu"]
    (repo / "a.py").write_text("x = 2\n")
    # untracked files (outputs) do not make a tree dirty
    (repo / "untracked.txt").write_text("run output\n")
    prov.code_state.cache_clear()
    dirty = prov.provenance()
    assert dirty["git_dirty"] is True and len(dirty["git_diff_sha256"]) == 64
    (repo / "a.py").write_text("x = 3\n")
    prov.code_state.cache_clear()
    # the hash names the diff
    assert prov.provenance()["git_diff_sha256"] != dirty["git_diff_sha256"]


def test_an_untracked_module_under_src_is_recorded_with_its_hash(repo: Path) -> None:
    """Issue 53: a callback loaded from an untracked module left ``git_dirty=false`` and no trace:
    untracked files under src/ and conf/ make the tree dirty and are named, with a hash."""
    import hashlib

    (repo / "outputs").mkdir()
    (repo / "outputs" / "metrics.json").write_text("{}\n")  # a run's output: not code
    assert prov.provenance()["git_dirty"] is False and prov.provenance()["git_untracked"] is None
    (repo / "src" / "callbacks").mkdir(parents=True)
    module = repo / "src" / "callbacks" / "mine.py"
    module.write_text("class Mine: ...\n")
    (repo / "conf").mkdir()
    (repo / "conf" / "mine.yaml").write_text("a: 1\n")
    prov.code_state.cache_clear()
    record = prov.provenance()
    sha = hashlib.sha256(module.read_bytes()).hexdigest()
    assert record["git_dirty"] is True and record["git_diff_sha256"] is None
    assert record["git_untracked"] == (
        f"conf/mine.yaml={hashlib.sha256(b'a: 1' + bytes([10])).hexdigest()}; "
        f"src/callbacks/mine.py={sha}"
    )
    module.write_text("class Mine: pass\n")
    prov.code_state.cache_clear()
    assert sha not in prov.provenance()["git_untracked"]


def test_no_git_gives_nulls_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prov, "REPO", tmp_path)  # not a repository
    prov.code_state.cache_clear()
    try:
        record = prov.provenance()
    finally:
        prov.code_state.cache_clear()
    assert record["git_commit"] is None and record["git_dirty"] is None and record["python"]


def test_a_run_records_it_and_the_report_warns_when_runs_differ(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from src.reporting.build import make_report
    from tests.reporting.fake_runs import completed, write_run
    from tests.training.conftest import TINY, train_in_process

    monkeypatch.setenv("TRANSFORMER_LAB_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    train_in_process([*TINY, "trainer.max_steps=2", "test=false"], run)
    recorded = json.loads((run / "metrics.json").read_text())["provenance"]
    assert set(recorded) == set(prov.FIELDS) and recorded["torch"]

    root = tmp_path / "sweep"
    for ffn, commit in (("gelu", "aaa"), ("swiglu", "bbb")):
        for seed, v in ((1, 2.0), (2, 2.1)):
            write_run(
                root,
                [f"model/ffn={ffn}", f"seed={seed}"],
                metrics={**completed(v, v), "provenance": {**recorded, "git_commit": commit}},
            )
    files = make_report([root], tmp_path / "out", baseline="model/ffn=gelu")
    md = files.markdown.read_text()
    assert "## Provenance" in md and "Warning: the verdict runs differ in git_commit" in md
    header = (tmp_path / "out" / "runs.csv").read_text().splitlines()[0].split(",")
    assert {f"provenance/{k}" for k in prov.FIELDS} <= set(header)


def test_a_run_records_the_code_as_it_started_not_as_it_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit made while a long run trains must not become its recorded commit: the record is read
    before the run builds anything, and that reading is what metrics.json holds."""
    from src.training import runner
    from tests.training.conftest import TINY, train_in_process

    monkeypatch.setenv("TRANSFORMER_LAB_CACHE", str(tmp_path / "cache"))
    built: list[bool] = []
    real_build = runner.build_run
    monkeypatch.setattr(runner, "build_run", lambda cfg: (built.append(True), real_build(cfg))[1])
    reads: list[bool] = []
    monkeypatch.setattr(
        runner,
        "provenance",
        lambda: (reads.append(bool(built)), {"read_after_build": bool(built)})[1],
    )
    run = tmp_path / "run"
    train_in_process([*TINY, "trainer.max_steps=2", "test=false"], run)
    assert built and reads == [False]  # read once, before the model and data were built
    assert json.loads((run / "metrics.json").read_text())["provenance"] == {
        "read_after_build": False
    }
