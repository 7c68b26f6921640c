"""docs/attention.md's demonstration tables are the committed runs' numbers: each block between its
``<!-- demo:NAME -->`` markers equals what experiments/attention_patterns/table.py prints from
experiments/attention_patterns/runs/ (and study 2's committed text runs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import load_script

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "experiments" / "attention_patterns" / "table.py"


def _table_module():
    return load_script(SCRIPT, "attention_demo_table")


@pytest.mark.parametrize("name", ["copy", "text"])
def test_the_docs_tables_equal_the_runs(name: str) -> None:
    table = _table_module()
    docs = (REPO / "docs" / "attention.md").read_text()
    found = re.search(rf"<!-- demo:{name} -->\n(.*?)\n<!-- /demo:{name} -->", docs, re.S)
    assert found, f"docs/attention.md has no demo:{name} block"
    expected = table.TABLES[name]()
    assert found.group(1).strip() == expected.strip()
    assert expected.count("\n") >= 3  # a header, its rule and at least two runs


def test_the_copy_runs_cover_two_depths_on_both_sides_of_the_copy_distance() -> None:
    rows = [r for r in _table_module().copy_table().splitlines()[2:]]
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
    depths = {c[0] for c in cells}
    assert depths == {"2", "4"}
    for depth in depths:
        assert {c[3] for c in cells if c[0] == depth} == {"yes", "no"}
    # below the reach the answer cannot see its source: nothing is copied
    assert all(c[4] == "0.00" for c in cells if c[3] == "no")
