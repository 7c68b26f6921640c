"""The claims ledger: each verdict a study README states, tied to the report row that decides it.

``experiments/<study>/claims.yaml`` is a list of entries::

    - id: warmup_helps_pre_ln                 # unique in the ledger
      sentence: Warmup helps pre-LN (Δ 0.188, p_holm 0.0056).   # the claim as the README says it
      report: cpu                             # the report directory or its comparisons.csv,
                                              # relative to this file
      row: "test/loss: <variant> vs <reference>"   # the row id in that comparisons.csv
      verdict: worse                          # better | worse | equivalent | inconclusive |
                                              # no verdict | higher | lower
      direction: higher                       # optional: the sign of the row's delta asserted
      cause: false                            # optional: true when the sentence names a cause;
                                              # its row must then be an interaction row

A row's id is its ``row`` column; a report written before that column existed gives each row the
id ``f"{metric}: {variant} vs {reference}"``. ``read_ledger`` checks the file once (its keys,
verdict words, unique ids, that each report exists); ``check_claims`` compares every claim with
its row and the README's claims table with the one ``claims_table`` writes; ``write_claims``
writes that table into the README beside the ledger, between ``BEGIN`` and ``END``. So the README
says what the ledger says, and the ledger says what the reports say (``python -m src.report
--check-claims``; docs/studies.md, "The claims ledger").
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from src.errors import ConfigError, check_keys, did_you_mean
from src.files import atomic_write

#: the verdict words a claim may assert: the report's (``higher``/``lower`` for a metric without a
#: direction, ``no verdict`` for a family where none is possible)
VERDICTS = ("better", "worse", "equivalent", "inconclusive", "no verdict", "higher", "lower")
#: the sign of the row's delta a claim may assert
DIRECTIONS = ("lower", "higher")
KEYS = ("id", "sentence", "report", "row", "verdict", "direction", "cause")
REQUIRED = ("id", "sentence", "report", "row", "verdict")
COMPARISONS = "comparisons.csv"
BEGIN, END = "<!-- claims:begin -->", "<!-- claims:end -->"
README = "README.md"


@dataclass(frozen=True)
class Claim:
    """One ledger entry, checked. ``report`` is the comparisons.csv file (the ledger's directory
    joined with the spelled path); ``link`` is that file relative to the ledger, as the README
    links it."""

    id: str
    sentence: str
    report: Path
    link: str
    row: str
    verdict: str
    direction: str | None = None
    cause: bool = False  # the sentence names a cause: only an interaction row can carry it


@dataclass(frozen=True)
class Ledger:
    """A study's claims ledger: its file and its claims, in the file's order."""

    path: Path
    claims: tuple[Claim, ...]

    @property
    def readme(self) -> Path:
        return self.path.parent / README


@dataclass(frozen=True)
class ClaimsCheck:
    """What ``check_claims`` found: one line per claim that does not hold (``claims``) and per
    problem of the README's table (``readme``)."""

    ledger: Ledger
    claims: tuple[str, ...]
    readme: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.claims and not self.readme

    @property
    def summary(self) -> str:
        n = len(self.ledger.claims)
        if self.ok:
            return f"{n} claims match their reports"
        table = ", and the README's claims table does not match the ledger" if self.readme else ""
        return f"{len(self.claims)} of {n} claims do not match their reports{table}"


def _entry(raw: Any, index: int, path: Path, seen: set[str]) -> Claim:
    """One entry of the ledger at ``path`` checked into a ``Claim``."""
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"{path}: entry {index + 1} is {raw!r}, not a mapping; write it as id:, sentence:, "
            "report:, row:, verdict: (docs/studies.md, 'The claims ledger')"
        )
    name = raw.get("id")
    where = f"{path}: claim {name!r}" if name is not None else f"{path}: entry {index + 1}"
    check_keys(raw, KEYS, where=where)
    missing = [k for k in REQUIRED if k not in raw]
    if missing:
        raise ConfigError(f"{where} has no {', '.join(missing)}; add them")
    bad = [k for k in (*REQUIRED, "direction") if k in raw and not _text(raw[k])]
    if bad:
        raise ConfigError(
            f"{where}: {', '.join(f'{k}={raw[k]!r}' for k in bad)} must be text, not empty; "
            "quote the value"
        )
    if name in seen:
        raise ConfigError(f"{where} is the id of an earlier claim too; give each claim its own id")
    seen.add(name)
    verdict = raw["verdict"]
    if verdict not in VERDICTS:
        raise ConfigError(
            f"{where}: verdict={verdict!r} is not a verdict word{did_you_mean(verdict, VERDICTS)} "
            f"(accepted: {', '.join(VERDICTS)}); use the report row's word"
        )
    direction = raw.get("direction")
    if direction is not None and direction not in DIRECTIONS:
        raise ConfigError(
            f"{where}: direction={direction!r} is not one of {', '.join(DIRECTIONS)}; write the "
            "sign of the delta the sentence asserts, or leave direction out"
        )
    cause = raw.get("cause", False)
    if not isinstance(cause, bool):
        raise ConfigError(
            f"{where}: cause={cause!r} must be true or false (true: the sentence names a cause, "
            "so its row must be an interaction)"
        )
    link = PurePosixPath(raw["report"])
    if link.suffix != ".csv":
        link = link / COMPARISONS
    report = path.parent / link
    if not report.is_file():
        raise ConfigError(
            f"{where}: report={raw['report']!r} has no {report}; fix the path (relative to the "
            "ledger: the report directory or its comparisons.csv) or write the report with "
            "python -m src.report"
        )
    return Claim(name, raw["sentence"], report, str(link), raw["row"], verdict, direction, cause)


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def read_ledger(path: str | Path) -> Ledger:
    """The ledger at ``path``, checked once: every entry's keys, its verdict and direction words,
    unique ids, and that each report's comparisons.csv exists. A ``ConfigError`` names the file,
    the entry and the fix."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"{path} does not exist; give the path of a study's claims.yaml"
        ) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or type(e).__name__
        raise ConfigError(f"{path} is not valid YAML ({problem}{at}); fix its syntax") from None
    if not isinstance(raw, list) or not raw:
        raise ConfigError(
            f"{path} holds {type(raw).__name__}, not a list of claims; write one '- id: …' entry "
            "per claim (docs/studies.md, 'The claims ledger')"
        )
    seen: set[str] = set()
    return Ledger(path, tuple(_entry(entry, i, path, seen) for i, entry in enumerate(raw)))


def row_id(row: Mapping[str, str]) -> str:
    """A comparisons.csv row's id: its ``row`` column, else ``metric: variant vs reference``."""
    if row.get("row"):
        return row["row"]
    return f"{row['metric']}: {row['variant']} vs {row['reference']}"


def read_rows(report: Path) -> dict[str, list[dict[str, str]]]:
    """The rows of a comparisons.csv by id (a list, so an id given twice is seen)."""
    with report.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        columns = set(reader.fieldnames or ())
        if "verdict" not in columns or not (
            "row" in columns or {"metric", "variant", "reference"} <= columns
        ):
            raise ConfigError(
                f"{report} has no verdict and row (or metric, variant, reference) columns; name a "
                "report's comparisons.csv in the claim's report"
            )
        rows: dict[str, list[dict[str, str]]] = {}
        for row in reader:
            rows.setdefault(row_id(row), []).append(row)
    return rows


def _delta_sign(delta: str | None) -> str | None:
    """``lower`` / ``higher`` for a negative / positive delta; None for zero, empty or NaN."""
    try:
        value = float(delta or "nan")
    except ValueError:
        return None
    if math.isnan(value) or value == 0:
        return None
    return "lower" if value < 0 else "higher"


def claim_problem(claim: Claim, rows: Mapping[str, list[dict[str, str]]], ledger: Path) -> str:
    """One line saying how ``claim`` differs from its report's rows; ``""`` when it holds."""
    where = f"{ledger}: claim {claim.id!r}"
    found = rows.get(claim.row, [])
    if not found:
        hint = did_you_mean(claim.row, rows) or f" ({len(rows)} rows there, none close)"
        return (
            f"{where} names row {claim.row!r}, which {claim.link} does not have{hint}; copy the "
            "row id from the report (its row column, or 'metric: variant vs reference')"
        )
    if len(found) > 1:
        return (
            f"{where} names row {claim.row!r}, which {claim.link} has {len(found)} times; "
            "regenerate the report with python -m src.report"
        )
    row = found[0]
    wrong = []
    if row["verdict"] != claim.verdict:
        wrong.append(f"asserts {claim.verdict!r}, the row says {row['verdict']!r}")
    sign = _delta_sign(row.get("delta"))
    if claim.direction is not None and sign != claim.direction:
        wrong.append(
            f"asserts a {claim.direction} delta, the row's delta is {row.get('delta') or 'empty'}"
        )
    if claim.cause and row.get("interaction") != "True":
        wrong.append(
            "names a cause, but the row is not an interaction (a cause needs a difference of "
            "differences: declare it in protocol.interactions)"
        )
    if not wrong:
        return ""
    return (
        f"{where} {'; '.join(wrong)} (row {claim.row!r} of {claim.link}); fix the claim and its "
        "sentence to what the report says"
    )


def _cell(text: str) -> str:
    """Text fit for one cell of a markdown table: one line, its pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def claims_table(ledger: Ledger) -> str:
    """The README's claims table as the ledger writes it (between ``BEGIN`` and ``END``)."""
    arrows = {"lower": " (Δ < 0)", "higher": " (Δ > 0)", None: ""}
    lines = [
        f"<!-- written by python -m src.report --write-claims {ledger.path.name}: edit the "
        "ledger, not this table -->",
        "| claim | sentence | verdict | report row |",
        "|---|---|---|---|",
    ]
    for c in ledger.claims:
        lines.append(
            f"| `{_cell(c.id)}` | {_cell(c.sentence)} | {c.verdict}{arrows[c.direction]} | "
            f"`{_cell(c.row)}` in [{c.link}]({c.link}) |"
        )
    return "\n".join(lines) + "\n"


def _table_span(text: str, readme: Path, ledger: Path) -> tuple[int, int]:
    """Where the claims table sits in the README's ``text``: from the end of ``BEGIN`` to the
    start of ``END``."""
    begins, ends = text.count(BEGIN), text.count(END)
    start, stop = text.find(BEGIN), text.find(END)
    if begins != 1 or ends != 1 or stop < start:
        found = f"{begins} {BEGIN} and {ends} {END}"
        raise ConfigError(
            f"{readme} has {found}, not one of each in that order; put the two lines where the "
            f"claims table goes, then run python -m src.report --write-claims {ledger}"
        )
    return start + len(BEGIN), stop


def _readme_text(ledger: Ledger) -> str:
    try:
        return ledger.readme.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"{ledger.readme} does not exist; the study's README goes beside {ledger.path}, with "
            f"{BEGIN} and {END} where the claims table goes"
        ) from None


def write_claims(ledger: Ledger) -> Path:
    """Write the ledger's claims table into the README beside it, between the markers (atomically;
    the rest of the README is left as it is). Returns the README's path."""
    text = _readme_text(ledger)
    start, stop = _table_span(text, ledger.readme, ledger.path)
    return atomic_write(ledger.readme, f"{text[:start]}\n{claims_table(ledger)}{text[stop:]}")


def _around(line: str, at: int, width: int = 60) -> str:
    """``line`` from a little before column ``at`` (where it differs), at most ``width`` long."""
    start = max(0, at - 20)
    cut = line[start : start + width]
    return ("…" if start else "") + cut + ("…" if start + width < len(line) else "")


def readme_problem(ledger: Ledger) -> str:
    """One line when the README's claims table is not the one the ledger writes; ``""`` when it
    is."""
    try:
        text = _readme_text(ledger)
        start, stop = _table_span(text, ledger.readme, ledger.path)
    except ConfigError as e:
        return str(e)
    has = text[start:stop].strip().splitlines()
    writes = claims_table(ledger).strip().splitlines()
    if has == writes:
        return ""
    n = next(
        (i for i, (a, b) in enumerate(zip(has, writes, strict=False)) if a != b),
        min(len(has), len(writes)),
    )
    a, b = (has + ["(nothing)"])[n], (writes + ["(nothing)"])[n]
    col = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    return (
        f"{ledger.readme}: the claims table differs from what {ledger.path} writes (line "
        f"{n + 1}: the README has {_around(a, col)!r}, the ledger writes {_around(b, col)!r}); "
        f"change the ledger, not the table, then run python -m src.report --write-claims "
        f"{ledger.path}"
    )


def check_claims(ledger: Ledger) -> ClaimsCheck:
    """Every claim against its report's row (the verdict word, and the delta's sign when the claim
    asserts one), and the README's claims table against ``claims_table``. Each report is read
    once."""
    reports: dict[Path, dict[str, list[dict[str, str]]]] = {}
    problems = []
    for claim in ledger.claims:
        if claim.report not in reports:
            reports[claim.report] = read_rows(claim.report)
        problem = claim_problem(claim, reports[claim.report], ledger.path)
        if problem:
            problems.append(problem)
    readme = readme_problem(ledger)
    return ClaimsCheck(ledger, tuple(problems), (readme,) if readme else ())
