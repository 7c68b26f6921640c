"""The claims ledger (src/reporting/claims.py) and ``python -m src.report --check-claims`` /
``--write-claims``: on small fabricated comparisons.csv files, a ledger that matches passes, a
wrong verdict, a wrong direction or a missing row fails naming the claim, a bad ledger is one line,
and the README's table is written from the ledger and checked against it."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from src.errors import ConfigError
from src.report import main
from src.reporting.claims import (
    BEGIN,
    END,
    check_claims,
    claims_table,
    read_ledger,
    write_claims,
)

REPO = Path(__file__).resolve().parents[2]
LEDGERS = sorted(REPO.glob("experiments/*/claims.yaml"))

COLUMNS = ("metric", "variant", "reference", "delta", "p", "p_holm", "verdict")
# (metric, variant, reference, delta, verdict): a report of today, without the row column
ROWS = [
    ("test/loss", "model/ffn=swiglu", "model/ffn=gelu", "-0.05", "better"),
    ("test/loss", "model/ffn=relu", "model/ffn=gelu", "0.01", "inconclusive"),
    ("val/loss", "model/ffn=swiglu", "model/ffn=gelu", "-0.04", "equivalent"),
]
SWIGLU = "test/loss: model/ffn=swiglu vs model/ffn=gelu"
RELU = "test/loss: model/ffn=relu vs model/ffn=gelu"


def write_report(folder: Path, rows=ROWS, row_column: bool = False) -> Path:
    """A comparisons.csv in ``folder``; with ``row_column``, rows given as (row id, …) too."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "comparisons.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow((("row", "family") if row_column else ()) + COLUMNS)
        for r in rows:
            w.writerow(_cells(r))
    return path


def _cells(r: tuple) -> tuple:
    """(…, metric, variant, reference, delta, verdict) → the CSV's cells, p and p_holm filled."""
    *head, delta, verdict = r
    return (*head, delta, "0.01", "0.02", verdict)


def claim(**changes) -> dict:
    entry = {
        "id": "swiglu_better",
        "sentence": "SwiGLU beats GELU on test loss.",
        "report": "cpu",
        "row": SWIGLU,
        "verdict": "better",
        "direction": "lower",
    }
    return {**entry, **changes}


RELU_CLAIM = {
    "id": "relu_inconclusive",
    "sentence": "ReLU vs GELU: no difference | detected.",
    "report": "cpu/comparisons.csv",
    "row": RELU,
    "verdict": "inconclusive",
}


def study(tmp_path: Path, entries: list, readme: str | None = None) -> Path:
    """A study folder: its report (cpu/comparisons.csv), claims.yaml and a README with markers."""
    write_report(tmp_path / "cpu")
    ledger = tmp_path / "claims.yaml"
    ledger.write_text(yaml.safe_dump(entries, sort_keys=False, allow_unicode=True))
    text = f"# Study\n\nIntro.\n\n{BEGIN}\n{END}\n\nAfter.\n" if readme is None else readme
    (tmp_path / "README.md").write_text(text)
    return ledger


def run(*args: str) -> int:
    """``python -m src.report`` with ``args``: its exit status."""
    try:
        main(list(args))
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def test_matching_ledger_passes(tmp_path, capsys):
    ledger = study(tmp_path, [claim(), RELU_CLAIM])
    assert run("--write-claims", str(ledger)) == 0
    assert run("--check-claims", str(ledger)) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "2 claims match their reports"


def test_row_column_and_declared_ids(tmp_path):
    """A report with the row column: a declared question's own id, and ``no verdict``."""
    rows = [
        ("swiglu_vs_gelu", "primary", "test/loss", "model/ffn=swiglu", "model/ffn=gelu", "-0.05",
         "better"),
        ("ffn_x_norm", "interactions", "test/loss", "", "", "0.002", "no verdict"),
    ]  # fmt: skip
    ledger = study(
        tmp_path,
        [
            claim(row="swiglu_vs_gelu"),
            claim(id="interaction", row="ffn_x_norm", verdict="no verdict", direction="higher"),
        ],
    )
    write_report(tmp_path / "cpu", rows, row_column=True)
    write_claims(read_ledger(ledger))
    result = check_claims(read_ledger(ledger))
    assert result.ok, result.claims + result.readme
    # the row column wins: the id built from metric, variant, reference is not a row there
    (tmp_path / "claims.yaml").write_text(yaml.safe_dump([claim()]))
    assert "swiglu_better" in check_claims(read_ledger(ledger)).claims[0]


@pytest.mark.parametrize(
    "change, says",
    [
        ({"verdict": "equivalent"}, ["'equivalent'", "'better'"]),  # the report says better
        ({"direction": "higher"}, ["higher", "-0.05"]),  # its delta is negative
    ],
)
def test_claim_differing_from_its_row_fails(tmp_path, capsys, change, says):
    ledger = study(tmp_path, [claim(**change), RELU_CLAIM])
    write_claims(read_ledger(ledger))
    assert run("--check-claims", str(ledger)) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err  # the claim that fails, then the summary
    assert "'swiglu_better'" in err[0] and SWIGLU in err[0] and "fix the claim" in err[0]
    assert all(s in err[0] for s in says)
    assert err[1] == "1 of 2 claims do not match their reports"


def test_missing_row_suggests_the_nearest(tmp_path, capsys):
    ledger = study(tmp_path, [claim(row=SWIGLU.replace("swiglu", "swiglue", 1))])
    write_claims(read_ledger(ledger))
    assert run("--check-claims", str(ledger)) == 1
    line = capsys.readouterr().err.splitlines()[0]
    assert "'swiglu_better'" in line and "swiglue" in line
    assert f"did you mean {SWIGLU}" in line and "copy the row id" in line


@pytest.mark.parametrize(
    "entries, says",
    [
        ([claim(verdict="beter")], ["'swiglu_better'", "verdict='beter'", "did you mean better"]),
        ([claim(direction="down")], ["'swiglu_better'", "direction='down'", "leave direction out"]),
        ([claim(), claim(row=RELU)], ["'swiglu_better'", "its own id"]),
        ([claim(verdct="better")], ["'swiglu_better'", "verdct", "did you mean verdict"]),
        ([claim(report="gpu")], ["'swiglu_better'", "report='gpu'", "fix the path"]),
        ([{k: v for k, v in claim().items() if k != "row"}], ["'swiglu_better'", "no row"]),
        ([claim(id=3)], ["claim 3", "id=3", "quote"]),
        ({"claims": []}, ["list of claims"]),
    ],
)
def test_bad_ledger_is_one_line(tmp_path, capsys, entries, says):
    ledger = study(tmp_path, entries)
    with pytest.raises(ConfigError) as e:
        read_ledger(ledger)
    message = str(e.value)
    assert "\n" not in message and str(ledger) in message
    assert all(s in message for s in says), message
    assert run("--check-claims", str(ledger)) == 2
    assert capsys.readouterr().err.strip() == f"python -m src.report: {message}"


@pytest.mark.parametrize("text, says", [(None, "does not exist"), ("- id: [", "not valid YAML")])
def test_unreadable_ledger(tmp_path, text, says):
    path = tmp_path / "claims.yaml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ConfigError, match=says) as e:
        read_ledger(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_readme_table_round_trip(tmp_path):
    ledger_path = study(tmp_path, [claim(), RELU_CLAIM])
    ledger = read_ledger(ledger_path)
    readme = write_claims(ledger)
    text = readme.read_text()
    assert text.startswith("# Study\n\nIntro.\n\n") and text.endswith(f"{END}\n\nAfter.\n")
    assert text.count(claims_table(ledger)) == 1
    # one row per claim: id, sentence (its pipe escaped), verdict, row id and the report's link
    assert "| `swiglu_better` | SwiGLU beats GELU on test loss. | better (Δ < 0) |" in text
    assert "no difference \\| detected. | inconclusive |" in text
    assert f"`{RELU}` in [cpu/comparisons.csv](cpu/comparisons.csv)" in text
    assert check_claims(ledger).ok
    assert write_claims(ledger).read_text() == text  # writing again changes nothing


def test_readme_drift_is_caught(tmp_path, capsys):
    ledger = study(tmp_path, [claim(), RELU_CLAIM])
    readme = write_claims(read_ledger(ledger))
    readme.write_text(readme.read_text().replace("better (Δ < 0)", "better, clearly"))
    assert run("--check-claims", str(ledger)) == 1
    err = capsys.readouterr().err.splitlines()
    assert str(readme) in err[0] and "better, clearly" in err[0] and "--write-claims" in err[0]
    assert err[1].startswith("0 of 2 claims do not match") and "README" in err[1]
    # a claim the README states and the ledger does not is drift too
    readme.write_text(
        readme.read_text().replace(END, "| `extra` | Said only here. | better | x |\n" + END)
    )
    assert not check_claims(read_ledger(ledger)).ok


@pytest.mark.parametrize("text", ["# Study\n\nNo table.\n", f"# Study\n{END}\n{BEGIN}\n"])
def test_readme_without_markers(tmp_path, capsys, text):
    ledger = study(tmp_path, [claim()], readme=text)
    assert run("--check-claims", str(ledger)) == 1
    line = capsys.readouterr().err.splitlines()[0]
    assert str(tmp_path / "README.md") in line and f"--write-claims {ledger}" in line
    with pytest.raises(ConfigError, match="--write-claims"):
        write_claims(read_ledger(ledger))
    assert (tmp_path / "README.md").read_text() == text  # left as it was


def test_write_claims_cli(tmp_path, capsys):
    ledger = study(tmp_path, [claim()])
    assert run(f"--write-claims={ledger}") == 0
    assert "README.md" in capsys.readouterr().out
    assert claims_table(read_ledger(ledger)) in (tmp_path / "README.md").read_text()


@pytest.mark.parametrize(
    "ledger",
    LEDGERS
    or [pytest.param(None, marks=pytest.mark.skip(reason="no study has a claims.yaml yet"))],
    ids=lambda p: p.parent.name if p else "none",
)
def test_shipped_ledgers_match_their_reports(ledger):
    """Every study's ledger holds against its reports, and its README's table is the ledger's."""
    result = check_claims(read_ledger(ledger))
    assert result.ok, "\n".join([*result.claims, *result.readme])


def test_a_cause_must_rest_on_an_interaction_row(tmp_path):
    """cause: true (the sentence names a cause) holds only on a row the report marks as an
    interaction (a difference of differences), never on one comparison."""
    cause = {"sentence": "The format causes ALiBi's lead.", "report": "cpu", "verdict": "better"}
    ledger = study(tmp_path, [{"id": "c", "row": "alibi_lead", "cause": True, **cause}])
    with (tmp_path / "cpu" / "comparisons.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(("row", "family", *COLUMNS, "interaction"))
        w.writerow(("alibi_lead", "test/acc", "test/acc", "alibi", "nope", "0.3", "0.01", "0.02",
                    "better", "False"))  # fmt: skip
        w.writerow(("format_x_scheme", "primary", "test/acc", "(a − b) at f=x", "(a − b) at f=y",
                    "0.2", "0.01", "0.02", "better", "True"))  # fmt: skip
    problems = check_claims(read_ledger(ledger)).claims
    assert len(problems) == 1 and "the row is not an interaction" in problems[0]
    ledger.write_text(
        yaml.safe_dump([{"id": "c", "row": "format_x_scheme", "cause": True, **cause}])
    )
    assert not check_claims(read_ledger(ledger)).claims
    ledger.write_text(
        yaml.safe_dump([{"id": "c", "row": "format_x_scheme", "cause": "yes", **cause}])
    )
    with pytest.raises(ConfigError, match="cause='yes' must be true or false"):
        read_ledger(ledger)
