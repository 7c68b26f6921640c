"""A synthetic task's test length that a learned position table cannot hold: synthetic.json's note reaches the
report as the reason beside the missing figure ("not applicable", not a bare blank), and the study export keeps
synthetic.json so a committed run still says why."""
from __future__ import annotations

import json
from pathlib import Path

from src.report import make_report
from src.studies.export import export
from src.studies.runs import read_run
from tests.reporting.fake_runs import completed, write_run

NOTE = "not applicable: learned position table has 64 rows; this sequence needs 128"


def _sweep(root: Path) -> Path:
    for position, em in (("learned", 1.0), ("rope", 0.9)):
        for seed in (1, 2, 3):
            metrics = {**completed(0.1, 0.1), "test/exact_match": em, "test/exact_match@16": em,
                       "test/exact_match@64": None if position == "learned" else 0.1 * seed}
            run = write_run(root, [f"model/position={position}", f"seed={seed}"], metrics=metrics,
                            config={"report": {"equivalence_margin": 0.05}})
            test = {"16": {"exact_match": em, "note": None},
                    "64": {"exact_match": None, "note": NOTE} if position == "learned" else {"exact_match": 0.1, "note": None}}
            (run / "synthetic.json").write_text(json.dumps({"train_length": 16, "test": test}))
    return root


def test_the_note_becomes_the_reason_and_survives_the_export(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path / "sweep")
    learned = read_run(next(sweep.glob("model.position=learned,seed=1")))
    assert learned.metrics["test/exact_match@64_reason"] == NOTE and "test/exact_match@16_reason" not in learned.metrics
    export(sweep, tmp_path / "runs")
    kept = next((tmp_path / "runs").glob("model.position=learned,seed=1"))
    assert (kept / "synthetic.json").is_file()
    files = make_report([tmp_path / "runs"], tmp_path / "out", metric="test/exact_match",
                        extra=["test/exact_match@64"], baseline="model/position=rope")
    md = files.markdown.read_text()
    assert "learned position table has 64 rows; this sequence needs 128" in md
