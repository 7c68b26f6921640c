"""python -m src.studies.export writes only inside its destination, mirrors each job it exports,
names what it cannot export, and refuses a bad destination in one line.

Every test hashes the whole tmp tree outside the destination (files, links and their targets'
names) before and after the command, and asserts that nothing there changed: real symlinks to
files and directories outside the destination, dangling links, a real re-export after a job's
files changed."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from src.report import make_report
from src.studies import export as ex
from src.studies.runs import load_runs
from tests.reporting.fake_runs import completed, write_run

JOB = "model.ffn=gelu,seed=1"
OTHER = "model.ffn=swiglu,seed=1"


def snapshot(tree: Path, dest: Path) -> dict[str, str]:
    """Every entry below ``tree`` but ``dest`` (lexically): a file's sha256, a link's target, a
    directory's mark. Links are not followed."""
    out: dict[str, str] = {}
    for d, dirs, names in os.walk(tree):
        here = Path(d)
        if here == dest or dest in here.parents:
            dirs[:] = []
            continue
        for name in dirs + names:
            p = here / name
            if p == dest:
                continue
            rel = p.relative_to(tree).as_posix()
            if p.is_symlink():
                out[rel] = "link -> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def make_sweep(root: Path) -> Path:
    for ffn in ("gelu", "swiglu"):
        run = write_run(
            root,
            [f"model/ffn={ffn}", "seed=1"],
            metrics=completed(2.1, 2.2),
            val_history=[(10, 2.5)],
        )
        (run / ".sweep_job.json").write_text("{}")
    (root / "study_commands.sh").write_text("# 2026-01-01 00:00:00\npython -m src.train -m\n")
    (root / "multirun.yaml").write_text("hydra: {}\n")
    return root


def runs_folder(tmp_path: Path) -> Path:
    """``<tmp>/repo/runs``, not made yet (the tmp repository is)."""
    (tmp_path / "repo").mkdir(exist_ok=True)
    return tmp_path / "repo" / "runs"


def outside(tmp_path: Path) -> Path:
    """A directory outside the destination with a file and a sub-directory a link may point to."""
    o = tmp_path / "outside"
    (o / "dir").mkdir(parents=True)
    (o / "victim.txt").write_text("precious\n")
    (o / "dir" / "kept.txt").write_text("also precious\n")
    return o


def test_export_replaces_links_in_the_destination_and_never_writes_through_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep, dest, o = make_sweep(tmp_path / "sweep"), runs_folder(tmp_path), outside(tmp_path)
    (dest / JOB).mkdir(parents=True)
    (dest / JOB / "metrics.json").symlink_to(o / "victim.txt")  # a kept file's place
    (dest / JOB / "csv").symlink_to(o / "dir")  # a kept directory's place
    (dest / JOB / "notes.txt").symlink_to(o / "victim.txt")  # not a kept path at all
    (dest / "study_commands.sh").symlink_to(o / "victim.txt")  # the merged commands file
    (dest / "multirun.yaml").symlink_to(o / "ghost.yaml")  # dangling
    before = snapshot(tmp_path, dest)
    assert ex.main([str(sweep), str(dest)]) == 0
    out = capsys.readouterr().out
    assert snapshot(tmp_path, dest) == before and not (o / "ghost.yaml").exists()
    for rel in (f"{JOB}/metrics.json", f"{JOB}/csv/version_0/metrics.csv", "study_commands.sh"):
        assert not (dest / rel).is_symlink() and (dest / rel).is_file(), rel
        assert (dest / rel).read_bytes() == (sweep / rel).read_bytes(), rel
    assert not (dest / "multirun.yaml").is_symlink()
    assert (dest / "multirun.yaml").read_text() == "hydra: {}\n"
    assert not (dest / JOB / "csv").is_symlink() and not os.path.lexists(dest / JOB / "notes.txt")
    # the links the export removed are named (the links themselves, not their targets)
    assert f"removed {dest / JOB / 'csv'}" in out and f"removed {dest / JOB / 'notes.txt'}" in out


def test_export_refuses_a_linked_job_directory_before_writing_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep, dest, o = make_sweep(tmp_path / "sweep"), runs_folder(tmp_path), outside(tmp_path)
    dest.mkdir(parents=True)
    (dest / OTHER).symlink_to(o / "dir", target_is_directory=True)
    before = snapshot(tmp_path, dest)
    assert ex.main([str(sweep), str(dest)]) == 2
    err = capsys.readouterr().err
    assert snapshot(tmp_path, dest) == before
    assert sorted(p.name for p in dest.iterdir()) == [OTHER]  # nothing written at all
    assert len(err.strip().splitlines()) == 1 and str(dest / OTHER) in err
    assert "remove the link" in err and "Traceback" not in err


def test_restore_counts_links_as_present_and_never_writes_through_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep, runs, o = make_sweep(tmp_path / "sweep"), runs_folder(tmp_path), outside(tmp_path)
    ex.export(sweep, runs)
    again = tmp_path / "again"
    (again / JOB).mkdir(parents=True)
    (again / JOB / "metrics.json").symlink_to(o / "ghost.json")  # dangling, at a file's place
    (again / JOB / ".hydra").symlink_to(o / "nowhere")  # dangling, at a directory's place
    (again / OTHER).symlink_to(o / "dir", target_is_directory=True)  # a whole job linked out
    before = snapshot(tmp_path, again)
    assert ex.main(["--restore", str(runs), str(again)]) == 0
    captured = capsys.readouterr()
    assert snapshot(tmp_path, again) == before
    assert not (o / "ghost.json").exists() and not (o / "nowhere").exists()
    assert sorted(p.name for p in (o / "dir").iterdir()) == ["kept.txt"]
    assert (again / JOB / "metrics.json").is_symlink() and (again / OTHER).is_symlink()
    # what could be restored was: the CSV log beside the links; the top files
    assert (again / JOB / "csv" / "version_0" / "metrics.csv").is_file()
    assert (again / "study_commands.sh").read_text() == (runs / "study_commands.sh").read_text()
    for link in (JOB + "/metrics.json", JOB + "/.hydra", OTHER):
        assert link in captured.err
    r = ex.restore(runs, again)  # again: everything is there now, or behind a link
    assert r.copied == 0 and sorted(r.links) == sorted(
        [again / JOB / "metrics.json", again / JOB / ".hydra", again / OTHER]
    )


def test_a_re_export_mirrors_each_exported_job_and_touches_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep, dest = make_sweep(tmp_path / "sweep"), runs_folder(tmp_path)
    o = outside(tmp_path)
    v1 = sweep / JOB / "csv" / "version_1"
    v1.mkdir()
    (v1 / "metrics.csv").write_text("step,val/loss\n19,2.4\n")
    (sweep / JOB / "budget.json").write_text("{}")
    ex.export(sweep, dest)
    assert (dest / JOB / "csv" / "version_1" / "metrics.csv").is_file()
    # another sweep's job, a file of the folder and a job this sweep no longer has stay
    write_run(dest, ["model/ffn=relu", "seed=9"], metrics=completed(2.0, 2.0))
    (dest / "README.md").write_text("mine\n")
    (dest / JOB / "ok.txt").symlink_to(o / "victim.txt")
    # the job is re-run: a fresh version_0, no version_1, no budget.json
    for f in (v1 / "metrics.csv", sweep / JOB / "budget.json"):
        f.unlink()
    v1.rmdir()
    (sweep / JOB / "csv" / "version_0" / "metrics.csv").write_text("step,val/loss\n9,2.0\n")
    before = snapshot(tmp_path, dest)
    other_before = snapshot(dest, dest / JOB)
    capsys.readouterr()
    assert ex.main([str(sweep), str(dest)]) == 0
    out = capsys.readouterr().out
    assert snapshot(tmp_path, dest) == before and snapshot(dest, dest / JOB) == other_before
    kept = sorted(
        p.relative_to(dest / JOB).as_posix() for p in (dest / JOB).rglob("*") if not p.is_dir()
    )
    assert kept == sorted(
        p.relative_to(sweep / JOB).as_posix() for p in (sweep / JOB).rglob("*") if p.is_file()
    )
    assert (dest / JOB / "csv" / "version_0" / "metrics.csv").read_text().endswith("9,2.0\n")
    assert not (dest / JOB / "csv" / "version_1").exists()
    removed = [line for line in out.splitlines() if line.startswith("removed ")]
    assert sorted(removed) == sorted(
        f"removed {dest / JOB / rel} (the sweep's job no longer has it)"
        for rel in ("budget.json", "csv/version_1/metrics.csv", "ok.txt")
    )
    assert "3 stale files" in out
    assert (o / "victim.txt").read_text() == "precious\n"


def test_a_finished_job_without_hydra_is_named_by_export_and_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep, dest = make_sweep(tmp_path / "sweep"), runs_folder(tmp_path)
    broken = sweep / "model.ffn=relu,seed=1"
    (broken / "attempts" / "1").mkdir(parents=True)
    (broken / "metrics.json").write_text(json.dumps(completed(2.0, 2.0)))
    (broken / "attempts" / "1" / "metrics.json").write_text("{}")  # a previous attempt: no job
    (sweep / JOB / "eval_x").mkdir()
    (sweep / JOB / "eval_x" / "metrics.json").write_text("{}")  # an evaluation: no job
    before = snapshot(tmp_path, dest)
    assert ex.main([str(sweep), str(dest)]) == 0
    captured = capsys.readouterr()
    assert snapshot(tmp_path, dest) == before
    assert "exported 2 finished jobs" in captured.out and not (dest / broken.name).exists()
    warning = [line for line in captured.err.splitlines() if "warning" in line]
    assert len(warning) == 1 and broken.name in warning[0] and ".hydra/config.yaml" in warning[0]
    assert "attempts" not in warning[0] and "eval_x" not in warning[0]
    with pytest.warns(UserWarning, match="model.ffn=relu,seed=1") as record:
        assert len(load_runs([sweep])) == 2
    assert len(record) == 1 and "1 finished job(s) left out" in str(record[0].message)


def test_seeds_plan_travels_with_an_export_and_a_restore(tmp_path: Path) -> None:
    sweep, dest = make_sweep(tmp_path / "sweep"), runs_folder(tmp_path)
    plan = {
        "seeds": ["1"],
        "variants": ["model/ffn=gelu", "model/ffn=swiglu"],
        "needed": [2, 2],
        "target_mde": 0.02,
        "max_seeds": 6,
        "capped": False,
    }
    (sweep / "seeds_plan.json").write_text(json.dumps(plan))
    before = snapshot(tmp_path, dest)
    ex.export(sweep, dest)
    assert snapshot(tmp_path, dest) == before
    assert (dest / "seeds_plan.json").read_bytes() == (sweep / "seeds_plan.json").read_bytes()
    a = make_report([sweep], tmp_path / "a").markdown.read_text()
    b = make_report([dest], tmp_path / "b").markdown.read_text()
    line = [x for x in a.splitlines() if x.startswith("protocol.seeds: auto")]
    assert line and line == [x for x in b.splitlines() if x.startswith("protocol.seeds: auto")]
    again = tmp_path / "again"
    before = snapshot(tmp_path, again)
    ex.restore(dest, again)
    assert snapshot(tmp_path, again) == before
    assert (again / "seeds_plan.json").read_bytes() == (sweep / "seeds_plan.json").read_bytes()


def unwritable(tmp_path: Path) -> Path:
    """A directory this process cannot create: below a read-only directory, or (as root, whom
    permissions do not stop) below sysfs."""
    if os.geteuid() != 0:
        ro = tmp_path / "readonly"
        ro.mkdir()
        ro.chmod(0o555)
        return ro / "runs"
    if not Path("/sys/fs").is_dir():
        pytest.skip("running as root without sysfs: no place this process cannot write")
    return Path("/sys/fs/no_export_here")


@pytest.mark.parametrize(
    "case", ["same", "inside", "contains", "file", "restore_file", "restore_inside", "unwritable"]
)
def test_a_bad_destination_is_one_line_and_exit_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    sweep = make_sweep(tmp_path / "sweep")
    (tmp_path / "a_file").write_text("not a directory\n")
    dest = {
        "same": sweep,
        "inside": sweep / "runs",
        "contains": tmp_path,
        "file": tmp_path / "a_file",
        "restore_file": tmp_path / "a_file",
        "restore_inside": sweep / JOB,
        "unwritable": unwritable(tmp_path) if case == "unwritable" else None,
    }[case]
    fix = {
        "same": "give a runs folder outside the sweep",
        "inside": "give a runs folder outside the sweep",
        "contains": "give a runs folder outside the sweep",
        "file": "move the file away or give a directory",
        "restore_file": "move the file away or give a directory",
        "restore_inside": "restore into a sweep directory outside the runs folder",
        "unwritable": "give a directory you can write to",
    }[case]
    argv = ["--restore"] if case.startswith("restore") else []
    before = snapshot(tmp_path, tmp_path / "nothing")  # the whole tree
    assert ex.main([*argv, str(sweep), str(dest)]) == 2
    err = capsys.readouterr().err
    assert snapshot(tmp_path, tmp_path / "nothing") == before
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert str(dest) in err and fix in err
    if case == "unwritable":
        assert not dest.exists()


def test_a_sweep_that_is_one_run_mirrors_only_its_logs_in_a_shared_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(
        tmp_path, ["seed=1"], metrics=completed(2.0, 2.1), val_history=[(10, 2.5)], name="single"
    )
    dest = runs_folder(tmp_path)
    other = write_run(dest, ["model/ffn=relu", "seed=9"], metrics=completed(2.0, 2.0))
    (dest / "README.md").write_text("mine\n")
    (dest / "csv" / "version_1").mkdir(parents=True)
    (dest / "csv" / "version_1" / "metrics.csv").write_text("step,val/loss\n19,2.4\n")
    before = snapshot(tmp_path, dest)
    other_before = snapshot(other, tmp_path / "nothing")
    assert ex.main([str(run), str(dest)]) == 0
    out = capsys.readouterr().out
    assert (
        snapshot(tmp_path, dest) == before and snapshot(other, tmp_path / "nothing") == other_before
    )
    assert (dest / "README.md").read_text() == "mine\n"
    assert (dest / "metrics.json").read_bytes() == (run / "metrics.json").read_bytes()
    assert not (dest / "csv" / "version_1").exists() and "csv/version_1/metrics.csv" in out
