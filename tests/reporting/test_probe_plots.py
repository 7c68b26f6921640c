"""Probe curves in the comparison report: one figure per probe from the runs' CSV logs (mean and
min–max band over seeds), the induction step per run in the legend, and a run that never reached
the threshold shown as "not reached" rather than dropped."""

from __future__ import annotations

import json
from pathlib import Path

from src.reporting.build import make_report
from src.reporting.probe_plots import induction_note, probe_history
from src.studies.runs import read_run
from tests.reporting.fake_runs import completed, write_run

STEPS = (0, 10, 20, 30)


def probe_run(root: Path, layers: int, seed: int, curve: list[float], step: int | None) -> Path:
    extra = (
        {"probe/induction_step": step}
        if step is not None
        else {
            "probe/induction_step": None,
            "probe/induction_step_reason": "not reached: stayed at or below 0.4",
        }
    )
    run = write_run(
        root,
        [f"model.n_layer={layers}", f"seed={seed}"],
        name=f"L{layers}_s{seed}",
        metrics=completed(2.0, 2.1, **{"probe/induction_max": curve[-1]}, **extra),
        config={"callbacks": {"probes": {"induction_threshold": 0.4}}},
        val_history=[(30, 2.0)],
    )
    lines = [
        "step,probe/induction_max,probe/lens_loss@L0,probe/attn_entropy@L0,probe/attn_entropy@L1"
    ]
    lines += [f"{s},{v},{3 - v},0.9,0.8" for s, v in zip(STEPS, curve)]
    (run / "csv" / "version_1").mkdir(parents=True)
    (run / "csv" / "version_1" / "metrics.csv").write_text("\n".join(lines) + "\n")
    return run


def test_probe_figures_and_not_reached(tmp_path: Path) -> None:
    probe_run(tmp_path, 2, 0, [0.0, 0.3, 0.5, 0.6], 20)
    probe_run(tmp_path, 2, 1, [0.0, 0.2, 0.45, 0.7], 20)
    probe_run(tmp_path, 1, 0, [0.0, 0.02, 0.03, 0.03], None)
    files = make_report(
        [tmp_path], tmp_path / "out", metric="probe/induction_step", extra=["probe/induction_max"]
    )
    shown = {
        name: p.name
        for name, p in files.plots.items()
        if p is not None and name.startswith("probe/")
    }
    assert shown == {
        "probe/induction_max over training": "probe_induction_max.png",
        "probe/attn_entropy over training": "probe_attn_entropy.png",
        "probe/lens_loss over training": "probe_lens_loss.png",
    }
    assert all((tmp_path / "out" / name).stat().st_size > 5000 for name in shown.values())
    text = files.markdown.read_text()
    assert "n/a: not reached: stayed at or below 0.4" in text  # the 1-layer variant's verdict cell
    assert "![probe/induction_max over training](probe_induction_max.png)" in text
    row = next(r for r in files.report.rows if "n_layer=2" in r.label)
    # probe/induction_step as the verdict metric
    assert row.primary.n == 2 and row.primary.mean == 20.0


def test_history_and_induction_note(tmp_path: Path) -> None:
    run = read_run(probe_run(tmp_path, 1, 0, [0.0, 0.1, 0.2, 0.3], None))
    history = probe_history(run)
    assert history["probe/induction_max"] == {
        0: 0.0,
        10: 0.1,
        20: 0.2,
        30: 0.3,
    }  # logged at the step taken
    assert set(history) == {
        "probe/induction_max",
        "probe/lens_loss@L0",
        "probe/attn_entropy@L0",
        "probe/attn_entropy@L1",
    }
    assert induction_note(run) == "not reached"
    run.metrics = {**(run.metrics or {}), "probe/induction_step": 20}
    assert induction_note(run) == "20"
    assert json.loads((run.path / "metrics.json").read_text())["probe/induction_step"] is None
