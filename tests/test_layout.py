"""The source's layout bounds (STYLE.md, habits 1, 16 and 18): files short enough to read at once,
lines that fit 100 columns (ruff formats code; prose is wrapped by hand), and Lightning's private
attributes read in one compat module only."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
MAX_FILE_LINES = 450
MAX_LINE = 100
MAX_LONG_SHARE = 0.01  # a URL, a usage line or a table row may stay unbroken
COMPAT = SRC / "lightning_compat.py"
#: a private attribute of a Lightning object: trainer._x, self.trainer._x, a LightningModule's
#: self._trainer, trainer.fit_loop._x, and the connectors
PRIVATE_LIGHTNING = re.compile(
    r"\btrainer\._[a-z]\w*|\bself\._trainer\b(?!\s*[:=(])|\bpl_module\._[a-z]\w*"
    r"|\.(?:fit|validate|test|predict)_loop\._[a-z]\w*|\b_\w+_connector\b"
)


def _sources() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_no_source_file_is_longer_than_the_bound() -> None:
    long = {
        str(p.relative_to(REPO)): n
        for p in _sources()
        if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES
    }
    assert long == {}, f"split these by concept (at most {MAX_FILE_LINES} lines each): {long}"


def test_at_most_one_percent_of_source_lines_pass_100_columns() -> None:
    lines = [line for p in _sources() for line in p.read_text().splitlines()]
    over = [line for line in lines if len(line) > MAX_LINE]
    assert len(over) <= MAX_LONG_SHARE * len(lines), (
        f"{len(over)} of {len(lines)} lines are over {MAX_LINE} characters"
    )


def test_lightning_private_attributes_are_read_in_the_compat_module_only() -> None:
    found = [
        f"{p.relative_to(REPO)}:{i}: {line.strip()}"
        for p in _sources()
        if p != COMPAT
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if PRIVATE_LIGHTNING.search(line) and "weakref" not in line
    ]
    assert found == [], "move these reads into src/lightning_compat.py:\n" + "\n".join(found)


def test_the_private_attribute_pattern_finds_what_it_is_for() -> None:
    for line in (
        "x = self._trainer.global_step",
        "trainer._logger_connector.should_update_logs",
        "trainer.fit_loop._results",
    ):
        assert PRIVATE_LIGHTNING.search(line), line
    assert not PRIVATE_LIGHTNING.search("self.trainer.global_step")


#: basenames several packages use, each for the same role in each (STYLE.md: one word, one meaning)
SHARED_BASENAMES = {
    "base.py": "the base class of a registry's variants (optim, benchmarks, objectives, families, "
    "sources, synthetic tasks)",
    "suite.py": "every check of its kind run on one model (benchmarks, probes)",
    "probes.py": "the probes behind this package's interface (a callback, an inspect subcommand)",
    "datamodule.py": "a Lightning datamodule (token windows and pairs, synthetic examples)",
    "registry.py": "a registry: the Registry class, the objectives' instance",
}


def test_modules_share_a_basename_only_for_the_same_role() -> None:
    from collections import Counter

    names = Counter(p.name for p in _sources() if p.name != "__init__.py")
    shared = {name for name, n in names.items() if n > 1}
    assert shared <= set(SHARED_BASENAMES), (
        f"rename one of each: {sorted(shared - set(SHARED_BASENAMES))}"
    )


def test_every_source_path_cited_in_code_or_config_exists() -> None:
    """A path cited in a docstring, comment or YAML comment is one that can rot: each must exist."""
    cited = re.compile(r"\b(src/[\w/]+\.py)\b")
    texts = [*_sources(), *(REPO / "conf").rglob("*.yaml")]
    missing = sorted(
        {
            f"{m.group(1)} (cited in {p.relative_to(REPO)})"
            for p in texts
            for m in cited.finditer(p.read_text())
            if not (REPO / m.group(1)).is_file()
        }
    )
    assert missing == [], "\n".join(missing)
