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
            metrics = {
                **completed(0.1, 0.1),
                "test/exact_match": em,
                "test/exact_match@16": em,
                "test/exact_match@64": None if position == "learned" else 0.1 * seed,
            }
            run = write_run(
                root,
                [f"model/position={position}", f"seed={seed}"],
                metrics=metrics,
                config={"report": {"equivalence_margin": 0.05}},
            )
            test = {
                "16": {"exact_match": em, "note": None},
                "64": {"exact_match": None, "note": NOTE}
                if position == "learned"
                else {"exact_match": 0.1, "note": None},
            }
            (run / "synthetic.json").write_text(json.dumps({"train_length": 16, "test": test}))
    return root


def test_the_note_becomes_the_reason_and_survives_the_export(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path / "sweep")
    learned = read_run(next(sweep.glob("model.position=learned,seed=1")))
    assert (
        learned.metrics["test/exact_match@64_reason"] == NOTE
        and "test/exact_match@16_reason" not in learned.metrics
    )
    export(sweep, tmp_path / "runs")
    kept = next((tmp_path / "runs").glob("model.position=learned,seed=1"))
    assert (kept / "synthetic.json").is_file()
    files = make_report(
        [tmp_path / "runs"],
        tmp_path / "out",
        metric="test/exact_match",
        extra=["test/exact_match@64"],
        baseline="model/position=rope",
    )
    md = files.markdown.read_text()
    assert "learned position table has 64 rows; this sequence needs 128" in md


def test_the_exact_match_by_size_plot_draws_each_size_and_names_the_missing_ones(
    tmp_path: Path, monkeypatch
) -> None:
    import matplotlib.image

    from src.reporting import plots
    from src.reporting.build import make_report as build

    sweep = _sweep(tmp_path / "sweep")
    files = build(
        [sweep],
        tmp_path / "out",
        metric="test/exact_match",
        extra=["test/exact_match@64"],
        baseline="model/position=rope",
    )
    png = tmp_path / "out" / "test_exact_match_by_length.png"
    assert files.plots["test/exact_match by test size"] == png
    assert matplotlib.image.imread(png).shape[0] > 100  # a real image, not an empty file
    # the figure's lines: rope at 16 and 64 (its mean over seeds 1-3 at 64: 0.2); learned at 16 alone, 64 named n/a
    rows = files.report.rows
    fig_lines: dict = {}
    import matplotlib.pyplot as plt

    real_save = plots._save

    def keep(fig, path):  # read the lines off the figure before it is written and closed
        ax = fig.axes[0]
        fig_lines.update(
            {
                ln.get_label(): (list(ln.get_xdata()), list(ln.get_ydata()))
                for ln in ax.get_lines()
                if not ln.get_label().startswith("_")
            }
        )
        return real_save(fig, path)

    (tmp_path / "again").mkdir()
    monkeypatch.setattr(plots, "_save", keep)
    plots.by_length(rows, tmp_path / "again")
    plt.close("all")
    (learned,) = [k for k in fig_lines if "learned" in k]
    (rope,) = [k for k in fig_lines if "rope" in k]
    assert "n/a at 64" in learned and "n/a" not in rope
    assert fig_lines[learned][1] == [1.0]
    assert [round(y, 6) for y in fig_lines[rope][1]] == [0.9, 0.2]
    assert [round(x) for x in fig_lines[rope][0]] == [16, 64]
    # fewer than two sizes: nothing to draw
    assert plots.by_length([], tmp_path / "none") is None
