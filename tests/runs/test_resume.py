"""src.runs.resume decisions without training: skip, re-run, archive, continue from last.ckpt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from src.errors import NonFiniteLossError
from src.runs.resume import STAMP, skip_completed


def cfg_for(run_dir: Path, **extra):
    base = {
        "seed": 1,
        "optim": {"lr": 0.003},
        "trainer": {"max_steps": 10},
        "paths": {"output_dir": str(run_dir)},
        "sweep_resume": {"skip_completed": True, "incomplete": "restart"},
        "ckpt_path": None,
        **extra,
    }
    return OmegaConf.create(base)


def finish(run_dir: Path, status: str = "completed") -> None:
    (run_dir / "metrics.json").write_text(
        json.dumps({"status": status, "val/loss": 2.5, "val/loss_best": 2.4})
    )
    (run_dir / "csv").mkdir(exist_ok=True)


def test_completed_job_is_skipped_and_a_changed_value_reruns(tmp_path: Path) -> None:
    run = tmp_path / "job"
    assert skip_completed(cfg_for(run)) is None and (run / STAMP).is_file()  # fresh: runs
    finish(run)
    done = skip_completed(cfg_for(run))
    assert done is not None and done.value == 2.4
    # a key added to the defaults: same experiment
    assert skip_completed(cfg_for(run, num_workers=0)) is not None
    changed = cfg_for(run)
    changed.optim.lr = 0.01
    assert skip_completed(changed) is None  # a value changed: run again, the old attempt set aside
    assert (run / "attempts" / "1" / "metrics.json").is_file() and not (
        run / "metrics.json"
    ).exists()


def test_failed_or_interrupted_jobs_run_again(tmp_path: Path) -> None:
    run = tmp_path / "job"
    skip_completed(cfg_for(run))
    finish(run, status="failed")
    assert skip_completed(cfg_for(run)) is None and (run / "attempts" / "1" / "csv").is_dir()
    (run / "csv").mkdir()  # killed mid-run: no metrics.json
    assert skip_completed(cfg_for(run)) is None and (run / "attempts" / "2" / "csv").is_dir()


def test_a_diverged_job_is_a_result_not_repeated(tmp_path: Path) -> None:
    run = tmp_path / "job"
    skip_completed(cfg_for(run))
    error = "NonFiniteLossError: non-finite training loss at step 412"
    (run / "metrics.json").write_text(json.dumps({"status": "failed", "error": error}))
    with pytest.raises(NonFiniteLossError, match="step 412.*does not re-roll a divergence"):
        skip_completed(cfg_for(run))
    assert (
        json.loads((run / "metrics.json").read_text())["error"] == error
        and not (run / "attempts").exists()
    )
    changed = cfg_for(run)
    changed.optim.lr = (
        0.001  # another config may not diverge: it runs, the diverged attempt set aside
    )
    assert skip_completed(changed) is None and (run / "attempts" / "1" / "metrics.json").is_file()


def test_incomplete_last_continues_from_the_checkpoint(tmp_path: Path) -> None:
    run = tmp_path / "job"
    cfg = cfg_for(run, sweep_resume={"skip_completed": True, "incomplete": "last"})
    skip_completed(cfg)
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "last.ckpt").write_bytes(b"x")
    cfg = cfg_for(run, sweep_resume={"skip_completed": True, "incomplete": "last"})
    assert skip_completed(cfg) is None and cfg.ckpt_path == str(run / "checkpoints" / "last.ckpt")
    assert not (run / "attempts").exists()


def test_off_by_default(tmp_path: Path) -> None:
    cfg = cfg_for(tmp_path / "job", sweep_resume={"skip_completed": False, "incomplete": "restart"})
    assert skip_completed(cfg) is None and not (tmp_path / "job").exists()


def test_the_jobs_own_directory_wins_over_a_stale_hydra_runtime(
    tmp_path: Path, monkeypatch
) -> None:
    """Hydra's runtime singleton may still name an earlier job's directory (jobs in one process, or a
    test that ran before): the job's own ``paths.output_dir`` is where it writes, so that is read."""
    from types import SimpleNamespace

    from hydra.core.hydra_config import HydraConfig

    stale = tmp_path / "earlier_job"
    monkeypatch.setattr(
        HydraConfig,
        "get",
        staticmethod(lambda: SimpleNamespace(runtime=SimpleNamespace(output_dir=str(stale)))),
    )
    run = tmp_path / "job"
    assert skip_completed(cfg_for(run)) is None
    assert (run / STAMP).is_file() and not stale.exists()


def test_a_study_reading_its_runs_differently_does_not_rerun_them(tmp_path: Path) -> None:
    """protocol (more seeds, more candidates) and report.equivalence_margin say how runs are read."""
    run = tmp_path / "job"
    proto = {"seeds": [1, 2, 3], "tune": {"optim.lr": [0.001, 0.003]}, "stage": "confirm"}
    assert skip_completed(cfg_for(run, protocol=proto, report={"equivalence_margin": 0.02})) is None
    finish(run)
    grown = {**proto, "seeds": [1, 2, 3, 4, 5], "tune": {"optim.lr": [0.001, 0.003, 0.01]}}
    assert (
        skip_completed(cfg_for(run, protocol=grown, report={"equivalence_margin": 0.05}))
        is not None
    )


def test_a_null_that_became_a_node_reruns_the_job(tmp_path: Path) -> None:
    """Issue 21 item 4: ``model.position.scaling: null`` -> ``{name: yarn, factor: 4}`` is a changed model, not
    "keys added, values unchanged" (the old result would be kept under a config that never ran)."""
    run = tmp_path / "job"
    position = {"name": "rope", "theta": 10000.0, "scaling": None}
    assert skip_completed(cfg_for(run, model={"position": position})) is None
    finish(run)
    # same config: skipped
    assert skip_completed(cfg_for(run, model={"position": position})) is not None
    scaled = {**position, "scaling": {"name": "yarn", "factor": 4.0}}
    # null -> node: runs again
    assert skip_completed(cfg_for(run, model={"position": scaled})) is None
    assert (run / "attempts" / "1" / "metrics.json").is_file()
    stamp = json.loads((run / STAMP).read_text())
    assert stamp["config"]["model.position.scaling.name"] == "yarn"
    finish(run)
    # node -> null: runs again too
    assert skip_completed(cfg_for(run, model={"position": position})) is None
    assert (run / "attempts" / "2" / "metrics.json").is_file()


def test_sweep_resume_overrides_are_never_part_of_a_job_directory() -> None:
    """Issue 21 item 6: re-running a sweep with the advised sweep_resume.* overrides finds the same directories."""
    from src.runs.resume import job_dirname

    plain = job_dirname("model.position=rope,seed=1")
    assert (
        job_dirname(
            "model.position=rope,seed=1,sweep_resume.incomplete=last,sweep_resume.skip_completed=true"
        )
        == plain
    )
    long = ",".join(f"model.k{i}=v{i}" for i in range(40))
    assert job_dirname(long + ",sweep_resume.incomplete=last") == job_dirname(long)  # the hash too
    assert job_dirname("sweep_resume.incomplete=last") == "default"
