"""The README's Quick start and "Compare two variants" commands, run as written (issue 26).

Each ``python -m src.<entry point> …`` line of those sections' ```bash blocks is read out of
README.md and run in a fresh directory, shortened by overrides where a line trains (a few steps,
not hundreds), with ``outputs/<date>/<time>_tiny_causal_lm`` (or ``outputs/<run>``) replaced by the run the quick start made and ``../shared``
by the data beside the checkout (a line that needs absent data is skipped). The comparison's report
must give a verdict. Slow: about a dozen short runs.
"""

from __future__ import annotations

import csv
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
VERDICTS = {"better", "worse", "equivalent", "inconclusive"}
#: what makes a README training line short here; the study's learning-rate grid and seeds stay as written
SHORT = [
    "trainer.max_steps=12",
    "trainer.val_check_interval=6",
    "trainer.limit_val_batches=2",
    "trainer.limit_test_batches=2",
    "scheduler.warmup_steps=2",
]


def readme_commands(heading: str) -> list[str]:
    """The ``python -m src.…`` lines of the ```bash blocks under ``## <heading>`` (comments dropped)."""
    text = (REPO / "README.md").read_text()
    section = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert section, f"README.md has no '## {heading}' section"
    lines: list[str] = []
    for block in re.findall(r"^```bash\n(.*?)^```", section.group(1), re.S | re.M):
        for line in block.splitlines():
            command = line.split("  #", 1)[0].strip()
            if command.startswith(("python -m src.", "OMP_NUM_THREADS=1 python -m src.")):
                lines.append(command)
    return lines


def run_line(line: str, cwd: Path, run_entry_point: Any, substitutions: dict[str, str]) -> Any:
    for old, new in substitutions.items():
        line = line.replace(old, new)
    words = shlex.split(line)
    # drop an environment assignment (OMP_NUM_THREADS=1 is set anyway)
    words = words[words.index("python") + 1 :]
    assert words[0] == "-m"
    module, args = words[1], words[2:]
    if module in ("src.train", "src.study") and not any(a in ("--dry-run", "--plan") for a in args):
        args += SHORT
    r = run_entry_point(module, args, cwd=cwd, timeout=900)
    assert r.returncode == 0, f"{line}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r


def test_quick_start_commands(tmp_path: Path, run_entry_point: Any) -> None:
    lines = readme_commands("Quick start")
    assert lines[0] == "python -m src.train experiment=quickstart"
    r = run_line(lines[0], tmp_path, run_entry_point, {})
    (run_dir,) = tmp_path.glob("outputs/*/*_tiny_causal_lm")
    assert "final: val/loss" in r.stdout and f"run directory:   {run_dir.resolve()}" in r.stdout
    substitutions = {
        "outputs/<date>/<time>_tiny_causal_lm": str(run_dir),
        "outputs/<run>": str(run_dir),
        "../shared": str(SHARED),
    }
    for line in lines[1:]:
        if "../shared" in line and not SHARED.exists():
            continue  # the public data is optional
        run_line(line, tmp_path, run_entry_point, substitutions)


def test_compare_two_variants_gives_a_verdict(tmp_path: Path, run_entry_point: Any) -> None:
    lines = readme_commands("Compare two variants")
    sweep = next(line for line in lines if " -m experiment=" in line and "src.train" in line)
    report = next(line for line in lines if line.startswith("python -m src.report"))
    run_line(sweep, tmp_path, run_entry_point, {})
    sweep_dir = tmp_path / re.search(r"hydra\.sweep\.dir=(\S+)", sweep).group(1)  # type: ignore[union-attr]
    assert sorted(p.name for p in sweep_dir.iterdir() if p.is_dir()) == [
        f"model.position={p},seed={s}" for p in ("learned", "rope") for s in (1, 2, 3)
    ]
    r = run_line(report, tmp_path, run_entry_point, {})
    rows = list(csv.DictReader((sweep_dir / "comparisons.csv").open()))
    verdicts = {row["verdict"] for row in rows if row["metric"] == "test/loss"}
    assert verdicts and verdicts <= VERDICTS, rows
    assert (
        r.stdout.strip()
        .splitlines()[-1]
        .startswith(f"wrote {sweep_dir.relative_to(tmp_path)}/report.md")
    )  # where it went
    for line in lines:
        if line not in (sweep, report):  # the study: the protocol end to end, shortened
            run_line(line, tmp_path, run_entry_point, {})
    assert (tmp_path / "outputs" / "studies" / "quickstart" / "cpu" / "report.md").is_file()
