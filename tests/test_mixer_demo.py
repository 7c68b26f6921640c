"""docs/mixers.md's demonstration is the committed runs' numbers: each block between its
``<!-- demo:NAME -->`` markers equals what experiments/mixers/table.py prints from
experiments/mixers/runs/, and the runs are the ones experiments/mixers/command.sh describes
(every mixer on every task, 3,000 steps, parameters matched to attention's, a second rate only
where the first left the validation exact match below 0.5)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import load_script

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "experiments" / "mixers" / "table.py"


def _table_module():
    return load_script(SCRIPT, "mixer_demo_table")


@pytest.mark.parametrize("name", ["exact", "tokens"])
def test_the_docs_tables_equal_the_runs(name: str) -> None:
    table = _table_module()
    docs = (REPO / "docs" / "mixers.md").read_text()
    found = re.search(rf"<!-- demo:{name} -->\n(.*?)\n<!-- /demo:{name} -->", docs, re.S)
    assert found, f"docs/mixers.md has no demo:{name} block"
    assert found.group(1).strip() == table.TABLES[name]().strip()
    assert "not run" not in found.group(1)


def _overrides(run: Path) -> dict[str, str]:
    lines = yaml.safe_load((run / ".hydra" / "overrides.yaml").read_text())
    return dict(line.lstrip("+").split("=", 1) for line in lines)


def test_the_runs_are_the_described_ones() -> None:
    table = _table_module()
    for task in table.TASKS:
        reference = table.runs(task, "attention")["3e-3"]["params"]
        for mixer in table.MIXERS:
            done = table.runs(task, mixer)
            assert "3e-3" in done, f"{task}/{mixer} has no finished lr 3e-3 run"
            # the second rate exactly where the first left validation exact match below 0.5
            assert ("1e-3" in done) == (done["3e-3"]["val/exact_match"] < 0.5), (task, mixer)
            for lr, m in done.items():
                run = table.RUNS / task / (mixer if lr == "3e-3" else f"{mixer}@lr{lr}")
                o = _overrides(run)
                assert o["model/mixer"] == mixer and float(o["optim.lr"]) == float(lr)
                assert o["model/position"] == ("rope" if mixer == "attention" else "none")
                assert m["global_step"] == 3000 and o["seed"] == "1"
                assert abs(m["params"] - reference) / reference < 0.02, (task, mixer)
