"""The report writes only into its output directory (real symlinks), keeps a run's text on its
own line, and on a real full disk (a tmpfs) ends with one line and leaves the old report.md whole."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from src.reporting.build import make_report
from tests.faults import fill, mount_tmpfs, unmount
from tests.reporting.fake_runs import completed, write_run

REPO = Path(__file__).resolve().parents[2]


def sweep(
    root: Path, ffn_overrides: tuple[str, ...] = ("model/ffn=gelu", "model/ffn=relu")
) -> Path:
    for i, ffn in enumerate(ffn_overrides):
        for seed in (0, 1):
            write_run(
                root,
                [ffn, f"seed={seed}"],
                metrics=completed(3.0 + 0.1 * i + 0.01 * seed, 3.1 + 0.1 * i),
                val_history=[(10, 3.5), (20, 3.0)],
                name=f"{i}_{seed}",
            )
    return root


def test_symlinks_in_the_sweep_directory_are_replaced_never_written_through(tmp_path: Path) -> None:
    root = sweep(tmp_path / "sweep")
    victims = {}
    for name in ("report.md", "runs.csv", "loss_vs_tokens.png"):
        victims[name] = tmp_path / f"victim-{name}"
        victims[name].write_text("VICTIM")
        (root / name).symlink_to(victims[name])
    files = make_report([root])
    assert {v.read_text() for v in victims.values()} == {"VICTIM"}
    for name in victims:
        assert (root / name).is_file() and not (root / name).is_symlink()
    assert files.markdown == root / "report.md"


def test_override_text_cannot_add_lines_to_the_report(tmp_path: Path) -> None:
    root = sweep(
        tmp_path / "sweep", ("model/ffn=gelu", "model/ffn=relu\n# INJECTED HEADING\x1b[31m")
    )
    text = make_report([root]).markdown.read_text()
    assert "# INJECTED" not in text.splitlines()[1:] and "\x1b" not in text
    assert "relu\\n# INJECTED HEADING\\x1b[31m" in text  # shown, escaped, on the variant's own line


def test_many_run_directories_are_named_by_their_parent_and_count(tmp_path: Path) -> None:
    """A shell glob over a sweep's run directories (experiments/02_positions/command.sh) names each one as a root:
    the first paragraph says how many and under which directory, instead of every path; a few roots are each named."""
    root = sweep(tmp_path / "sweep")
    runs = sorted(p for p in root.iterdir() if p.is_dir())
    assert len(runs) == 4
    md = make_report(runs, tmp_path / "out").markdown.read_text()
    first = md.splitlines()[2]
    assert (
        first.startswith("4 runs in 2 variants from 4 run directories under `")
        and f"`{root}/`" in first
    )
    assert not any(f"`{r}`" in first for r in runs)
    md = make_report(runs[:2], tmp_path / "out2").markdown.read_text()
    assert all(f"`{r}`" in md.splitlines()[2] for r in runs[:2])


@pytest.fixture
def full_sweep(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    mount_tmpfs(disk, "200k")
    root = sweep(disk / "sweep")
    (root / "report.md").write_text("# the old report\n")
    fill(disk)
    yield root
    unmount(disk)


def test_a_full_disk_is_one_line_and_the_old_report_stays(full_sweep: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "src.report", str(full_sweep)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    assert "could not write" in r.stderr and "No space left on device" in r.stderr
    assert (full_sweep / "report.md").read_text() == "# the old report\n"
    assert not [p for p in full_sweep.iterdir() if ".tmp" in p.name]
