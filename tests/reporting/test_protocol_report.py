"""The report on sweeps written by hand: per-variant selection on validation, verdicts on test,
run outcomes, the two labelled stages, the CSV contracts and the protocol node's checks."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from src.errors import ConfigError
from src.report import make_report
from src.reporting.comparisons import IDENTICAL
from src.reporting.csv_files import REPORT_COLUMNS
from src.studies.outcomes import run_outcome
from src.studies.protocol import Protocol
from src.studies.runs import read_run
from tests.reporting.fake_runs import completed, write_run

LRS = ("1e-3", "2e-3", "4e-3")
# val/loss[variant][lr] per seed: the lowest single value (1.80, gelu at 4e-3) is not the lowest mean (gelu at 2e-3)
VAL = {
    "gelu": {"1e-3": [2.10, 2.12, 2.08], "2e-3": [1.95, 1.96, 1.94], "4e-3": [1.80, 2.30, 2.05]},
    "swiglu": {"1e-3": [2.20, 2.21, 2.19], "2e-3": [2.05, 2.06, 2.04], "4e-3": [1.90, 1.91, 1.92]},
}
PROTOCOL = {
    "factors": ["model/ffn"],
    "tune": {"optim.lr": [1e-3, 2e-3, 4e-3]},
    "design": "grid",
    "seeds": [1, 2, 3],
    "baseline": "model/ffn=gelu",
}


def grid_sweep(root: Path, protocol: dict | None = PROTOCOL) -> Path:
    cfg = {"protocol": protocol, "report": {"equivalence_margin": 0.05}} if protocol else {}
    for ffn, by_lr in VAL.items():
        for lr, vals in by_lr.items():
            for seed, v in zip((1, 2, 3), vals):
                write_run(
                    root,
                    [f"model/ffn={ffn}", f"optim.lr={lr}", f"seed={seed}"],
                    config=cfg,
                    metrics=completed(v, v + 0.01 * seed, **{"translation/bleu": 10 * v}),
                    val_history=[(50, v + 0.5), (100, v)],
                    train_history=[(10, 4.0), (100, v)],
                    budget={"flops_per_token": 6000.0, "match": "params"},
                    ngram={
                        "val": {
                            "1": {"loss": 3.3, "tokens": 640},
                            "3": {"loss": 2.0, "tokens": 640},
                        },
                        "test": {
                            "1": {"loss": 3.2, "tokens": 640},
                            "3": {"loss": 2.1, "tokens": 640},
                        },
                    },
                )
    return root


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_chosen_lr_is_the_argmin_of_the_mean_validation_loss(tmp_path: Path) -> None:
    files = make_report([grid_sweep(tmp_path / "sweep")], tmp_path / "out")
    rows = {r.label: r for r in files.report.rows}
    for ffn, by_lr in VAL.items():
        t = rows[f"model/ffn={ffn}"].tuned
        best = min(LRS, key=lambda lr: np.mean(by_lr[lr]))
        assert t.chosen == {"optim.lr": str(float(best))}  # canonical spelling: 1e-3 -> 0.001
        assert {c.values["optim.lr"]: c.score for c in t.candidates} == {
            str(float(lr)): pytest.approx(np.mean(v)) for lr, v in by_lr.items()
        }
        assert len(t.verdict_runs) == 3 and all(
            r.overrides["optim.lr"] == best for r in t.verdict_runs
        )
    assert rows["model/ffn=gelu"].tuned.edge == [] and rows["model/ffn=swiglu"].tuned.edge == [
        "optim.lr"
    ]
    table = {r["variant"]: r for r in read_csv(files.csv)}
    assert list(read_csv(files.csv)[0]) == [
        *REPORT_COLUMNS,
        "optim.lr",
    ]  # the contract's columns, then the tuned key
    assert (
        table["model/ffn=gelu"]["optim.lr"] == "0.002"
        and table["model/ffn=swiglu"]["optim.lr"] == "0.004"
    )
    md = files.markdown.read_text()
    assert "⚠ edge" in md and (tmp_path / "out" / "tuning_optim_lr.png").stat().st_size > 1000


def test_verdicts_use_test_and_recompute_from_runs_csv(tmp_path: Path) -> None:
    from scipy import stats

    files = make_report([grid_sweep(tmp_path / "sweep")], tmp_path / "out")
    runs = read_csv(files.runs_csv)
    assert len(runs) == 18 and {
        "variant",
        "seed",
        "stage",
        "role",
        "optim.lr",
        "val/loss",
        "test/loss",
        "translation/bleu",
        "flops_per_token",
        "train_flops",
    } <= set(runs[0])
    verdict = {
        v: {
            r["seed"]: float(r["test/loss"])
            for r in runs
            if r["variant"] == v and "verdict" in r["role"]
        }
        for v in ("model/ffn=gelu", "model/ffn=swiglu")
    }
    seeds = sorted(verdict["model/ffn=gelu"])
    # both variants ran seeds 0, 1, 2 on the same data: paired
    assert sorted(verdict["model/ffn=swiglu"]) == seeds
    a, b = (
        [verdict["model/ffn=swiglu"][s] for s in seeds],
        [verdict["model/ffn=gelu"][s] for s in seeds],
    )
    row = {r["variant"]: r for r in read_csv(files.csv)}["model/ffn=swiglu"]
    assert float(row["mean"]) == pytest.approx(np.mean(a)) and float(row["std"]) == pytest.approx(
        np.std(a, ddof=1)
    )
    assert float(row["delta"]) == pytest.approx(np.mean(a) - np.mean(b))
    assert float(row["p"]) == pytest.approx(stats.ttest_rel(a, b).pvalue)
    comps = read_csv(tmp_path / "out" / "comparisons.csv")
    assert comps[0]["test"] == "paired" and comps[0]["pairs"] == "3"
    assert float(comps[0]["correlation"]) == pytest.approx(np.corrcoef(a, b)[0, 1])
    unpaired = make_report([tmp_path / "sweep"], tmp_path / "out_welch", pairing="unpaired")
    welch = {r["variant"]: r for r in read_csv(unpaired.csv)}["model/ffn=swiglu"]
    assert float(welch["p"]) == pytest.approx(stats.ttest_ind(a, b, equal_var=False).pvalue)
    # no primary family declared: each metric is a family of one test, so Holm leaves p alone
    assert [(c["metric"], c["family"]) for c in comps] == [
        ("test/loss", "test/loss"),
        ("translation/bleu", "translation/bleu"),
    ]
    assert float(row["p_holm"]) == pytest.approx(float(row["p"]))
    assert comps[1]["test"] == "sign-flip" and comps[1]["test_why"] == "bounded metric"
    assert row["verdict"] in ("better", "worse", "equivalent", "inconclusive")
    # the references and the compute columns
    md = files.markdown.read_text()
    # test-split trigram in the verdict table
    assert "reference: trigram (Kneser-Ney)" in md and "| 2.1000 |" in md
    assert float(runs[0]["train_flops"]) == 6000.0 * 6400


def test_two_stages_select_on_tune_and_judge_on_confirm(tmp_path: Path) -> None:
    proto = {**PROTOCOL, "design": "two_stage", "tune_seeds": [0], "seeds": [1, 2]}
    root = tmp_path / "sweep"
    for lr, v in zip(LRS, (2.0, 1.9, 2.1)):  # tune stage: seed 0 at every lr
        write_run(
            root,
            ["optim.lr=" + lr, "seed=0", "protocol.stage=tune"],
            config={"protocol": {**proto, "stage": "tune"}},
            metrics=completed(v, v),
        )
    for seed, t in (
        (1, 1.7),
        (2, 1.8),
    ):  # confirm stage at the chosen 2e-3 (and one stray run at 1e-3)
        write_run(
            root,
            ["optim.lr=2e-3", f"seed={seed}", "protocol.stage=confirm"],
            config={"protocol": {**proto, "stage": "confirm"}},
            metrics=completed(9.0, t),
        )
    write_run(
        root,
        ["optim.lr=1e-3", "seed=1", "protocol.stage=confirm"],
        config={"protocol": {**proto, "stage": "confirm"}},
        metrics=completed(0.1, 0.1),
    )
    files = make_report([root], tmp_path / "out")
    (row,) = files.report.rows
    # the confirm runs' val (9.0, 0.1) never enters selection
    assert row.tuned.chosen == {"optim.lr": "0.002"}
    assert row.primary.n == 2 and row.primary.mean == pytest.approx(1.75)
    roles = {(r["seed"], r["stage"], r["optim.lr"]): r["role"] for r in read_csv(files.runs_csv)}
    assert (
        roles[("0", "tune", "0.002")] == "selection"
        and roles[("1", "confirm", "0.002")] == "verdict"
    )
    assert roles[("1", "confirm", "0.001")] == ""


def test_missing_confirm_stage_is_said(tmp_path: Path) -> None:
    proto = {**PROTOCOL, "design": "two_stage", "tune_seeds": [0]}
    for lr in LRS:
        write_run(
            tmp_path / "s",
            ["optim.lr=" + lr, "seed=0", "protocol.stage=tune"],
            config={"protocol": {**proto, "stage": "tune"}},
            metrics=completed(2.0, 2.0),
        )
    files = make_report([tmp_path / "s"], tmp_path / "out")
    assert files.report.rows[0].primary.n == 0
    assert "the confirm stage has not run" in files.markdown.read_text()


def test_stages_reports_the_tune_stage_alone_while_the_confirm_stage_runs(tmp_path: Path) -> None:
    """Study 2 lands a task's tune-stage report at a stop that falls inside its confirm stage: `--stages tune` leaves
    the confirm runs finished so far (too few seeds for a verdict) out of the report."""
    proto = {**PROTOCOL, "design": "two_stage", "tune_seeds": [0], "seeds": [1, 2, 3]}
    root = tmp_path / "sweep"
    for lr, v in zip(LRS, (2.0, 1.9, 2.1)):
        write_run(
            root,
            ["optim.lr=" + lr, "seed=0", "protocol.stage=tune"],
            config={"protocol": {**proto, "stage": "tune"}},
            metrics=completed(v, v),
        )
    write_run(
        root,
        ["optim.lr=2e-3", "seed=1", "protocol.stage=confirm"],  # 1 of the 3 confirm seeds so far
        config={"protocol": {**proto, "stage": "confirm"}},
        metrics=completed(1.8, 1.7),
    )
    assert make_report([root], tmp_path / "all").report.rows[0].primary.n == 1
    files = make_report([root], tmp_path / "tune", stages=["tune"])
    (row,) = files.report.rows
    assert row.tuned.chosen == {"optim.lr": "0.002"} and row.primary.n == 0 and len(files.runs) == 3
    md = files.markdown.read_text()
    assert "the confirm stage has not run" in md
    # the header says which stages are in and what was left out; no empty provenance section
    assert (
        "**Stages tune only** (`--stages`): 1 run of stage confirm left out of this report. Without verdict runs"
        in md
    )
    full = make_report([root], tmp_path / "all").markdown.read_text()
    assert (
        "## Provenance" not in md
        and "## Compute" not in md
        and "## Provenance" in full
        and "## Compute" in full
    )
    # without verdict runs the tuning table shows each candidate's own test/loss, marked as read, not chosen on
    assert (
        "| mean val/loss | | test/loss |" in md
        and "| 0.002 | 1 | 1.9000 | **chosen** | 1.9000 |" in md
    )
    assert (
        "the choice is on the selection metric alone" in md
        and "| test/loss |" not in full.split("## Tuning")[1]
    )
    # no table of dashes: the verdicts section says there are none and names the choices
    verdicts = md.split("## Verdicts on `test/loss`")[1].split("##")[0]
    assert (
        "None: no run of the report is a verdict run" in verdicts and "optim.lr=0.002" in verdicts
    )
    assert "| mean ± std |" not in md and "| mean ± std |" in full
    both = make_report([root], tmp_path / "both", stages=["tune", "confirm"]).markdown.read_text()
    assert "**Stages confirm, tune only** (`--stages`): the runs found hold no other stage." in both
    assert "Without verdict runs" not in both and "## Compute" in both
    with pytest.raises(
        ConfigError, match=r"--stages grid: none of the 4 runs.*found: confirm, tune"
    ):
        make_report([root], tmp_path / "none", stages=["grid"])


def test_run_outcomes(tmp_path: Path) -> None:
    r = lambda name, **kw: read_run(write_run(tmp_path, [f"seed={name}"], name=name, **kw))  # noqa: E731
    assert run_outcome(r("ok", metrics=completed(2.0, 2.1), val_history=[(10, 2.0)])) == "ok"
    assert (
        run_outcome(
            r(
                "high",
                metrics=completed(9.0, 9.0),
                val_history=[(10, 9.0)],
                train_history=[(1, 4.0)],
            )
        )
        == "ok"
    )
    short = r("short", metrics=completed(None, 2.3), train_history=[(1, 4.0), (2, 3.5)])
    assert run_outcome(short) == "no validation" and short.metric("test/loss") == 2.3
    # NaN -> null
    assert run_outcome(r("nanval", metrics={**completed(2.0, 2.0), "val/loss": None})) == "diverged"
    # a literal NaN or Infinity in metrics.json (json.dumps writes them so): the same outcome as null
    # (issue 53: a NaN test/loss was read as a finished run)
    for name, bad, literal in (("nan", math.nan, "NaN"), ("inf", math.inf, "Infinity")):
        run = r(f"literal{name}", metrics={**completed(2.0, 2.0), "test/loss": bad})
        assert f'"test/loss": {literal}' in (run.path / "metrics.json").read_text()
        assert run_outcome(run) == "diverged"
    assert (
        run_outcome(
            r("nanlog", metrics=completed(2.0, 2.0), train_history=[(1, 4.0), (2, math.nan)])
        )
        == "diverged"
    )
    assert (
        run_outcome(
            r(
                "guard",
                metrics={
                    "status": "failed",
                    "error": "NonFiniteLossError: non-finite training loss",
                },
            )
        )
        == "diverged"
    )
    assert (
        run_outcome(
            r("crash", metrics={"status": "failed", "error": "RuntimeError: out of memory"})
        )
        == "failed"
    )
    assert run_outcome(r("running", metrics=None)) == "incomplete"


def test_no_validation_runs_count_for_test_but_not_for_selection(tmp_path: Path) -> None:
    root = tmp_path / "s"
    for seed in (1, 2):
        write_run(
            root, ["model/ffn=gelu", f"seed={seed}"], metrics=completed(None, 2.0 + seed / 10)
        )
        write_run(
            root,
            ["model/ffn=swiglu", f"seed={seed}"],
            metrics=completed(1.0, 1.5 + seed / 10),
            val_history=[(5, 1.0)],
        )
    files = make_report([root], tmp_path / "out", baseline="model/ffn=gelu")
    gelu = files.report.rows[files.report.baseline]
    assert (
        gelu.status == "2 no validation"
        and gelu.primary.n == 2
        and gelu.primary.mean == pytest.approx(2.15)
    )


def test_protocol_node_is_checked() -> None:
    with pytest.raises(ConfigError, match=r"protocol.seed=\[1\] is not a key of protocol"):
        Protocol.from_node({"tune": {"optim.lr": [1e-3]}, "seed": [1]})
    with pytest.raises(ConfigError, match="verdicts use the test split"):
        Protocol.from_node({"metric": "val/loss"})
    with pytest.raises(ConfigError, match="two_stage needs protocol.tune_seeds"):
        Protocol.from_node({"design": "two_stage"})
    with pytest.raises(ConfigError, match="match='compute'"):
        Protocol.from_node({"match": "compute"})
    with pytest.raises(ConfigError, match="equivalence_margin"):
        Protocol.from_node({}, margin=-1)
    p = Protocol.from_node({"tune": {"optim.lr": ["1e-3", 0.002]}}, margin={"test/loss": 0.02})
    assert p.tune == {"optim.lr": ["0.001", "0.002"]} and p.equivalence_margin == {
        "test/loss": 0.02
    }


def test_runs_with_different_protocols(tmp_path: Path) -> None:
    """Seeds and candidates may grow between stages (joined); anything else must agree or be given."""
    write_run(tmp_path, ["seed=1"], config={"protocol": PROTOCOL}, metrics=completed(2.0, 2.0))
    write_run(
        tmp_path,
        ["seed=4"],
        config={"protocol": {**PROTOCOL, "seeds": [4], "tune": {"optim.lr": [8e-3]}}},
        metrics=completed(2.0, 2.0),
    )
    p = make_report([tmp_path], tmp_path / "out").report.protocol
    assert p.seeds == ["1", "2", "3", "4"] and p.tune == {
        "optim.lr": ["0.001", "0.002", "0.004", "0.008"]
    }
    write_run(
        tmp_path,
        ["seed=5"],
        config={"protocol": {**PROTOCOL, "baseline": "model/ffn=swiglu"}},
        metrics=completed(2.0, 2.0),
    )
    with pytest.raises(
        ConfigError, match=r"different protocols: baseline .* \(choose with --baseline\)"
    ):
        make_report([tmp_path], tmp_path / "out")
    assert (
        make_report(
            [tmp_path], tmp_path / "out", baseline="model/ffn=gelu"
        ).report.protocol.baseline
        == "model/ffn=gelu"
    )


def test_tune_flag_without_a_declared_protocol(tmp_path: Path) -> None:
    files = make_report(
        [grid_sweep(tmp_path / "sweep", protocol=None)],
        tmp_path / "out",
        tune=["optim.lr"],
        baseline="model/ffn=gelu",
        equivalence_margin=0.05,
    )
    assert not files.report.protocol.declared and [r.tuned.chosen for r in files.report.rows] == [
        {"optim.lr": "0.002"},
        {"optim.lr": "0.004"},
    ]
    assert "±0.05" in files.markdown.read_text()
    # no --tune: the lr defines variants
    untuned = make_report([tmp_path / "sweep"], tmp_path / "out2")
    assert len(untuned.report.rows) == 6 and all(r.primary.n == 3 for r in untuned.report.rows)
    json.loads(json.dumps(read_csv(untuned.csv)))  # plain strings


def test_one_factor_pairs_under_flops_matching(tmp_path: Path) -> None:
    """Under flops matching every variant runs its own solved trainer.max_steps (python -m src.study);
    the steps follow from the factors, so pairs that differ in one factor are still compared."""
    proto = {
        "factors": ["model/ffn", "model/norm"],
        "design": "grid",
        "seeds": [1, 2],
        "match": "flops",
        "baseline": "model/ffn=gelu,model/norm=layernorm",
        "comparisons": "one_factor",
    }
    steps = {
        ("gelu", "layernorm"): 100,
        ("gelu", "rmsnorm"): 101,
        ("swiglu", "layernorm"): 97,
        ("swiglu", "rmsnorm"): 98,
    }
    for (ffn, norm), n in steps.items():
        for seed in (1, 2):
            write_run(
                tmp_path / "s",
                [
                    f"model/ffn={ffn}",
                    f"model/norm={norm}",
                    f"trainer.max_steps={n}",
                    f"seed={seed}",
                ],
                config={"protocol": proto},
                metrics=completed(2.0, 2.0 + 0.01 * seed + 0.1 * (ffn == "swiglu")),
            )
    report = make_report([tmp_path / "s"], tmp_path / "out").report
    pairs = {(c.variant, c.reference) for c in report.comparisons}

    def label(ffn: str, norm: str) -> str:
        return f"model/ffn={ffn}, model/norm={norm}, trainer.max_steps={steps[ffn, norm]}"

    assert pairs == {
        (label(*v), label("gelu", "layernorm")) for v in steps if v != ("gelu", "layernorm")
    } | {
        (label("swiglu", "rmsnorm"), label("gelu", "rmsnorm")),
        (label("swiglu", "rmsnorm"), label("swiglu", "layernorm")),
    }
    # the fabricated metric ignores model/norm: the 2 pairs differing in the norm alone are identical
    # by construction (no test, no family); the test/loss family holds the other 3
    identical = [c for c in report.comparisons if c.family == IDENTICAL]
    assert sorted((c.variant, c.reference) for c in identical) == sorted(
        [
            (label("gelu", "rmsnorm"), label("gelu", "layernorm")),
            (label("swiglu", "rmsnorm"), label("swiglu", "layernorm")),
        ]
    )
    assert report.sizes == {"test/loss": 3}


def test_factor_comparisons_pair_each_variant_with_itself_under_the_other_value(
    tmp_path: Path,
) -> None:
    """``comparisons: factor:<key>`` (an ablation): only the pairs that differ in <key> alone, the baseline's
    pair in the verdict table, Holm over those alone; a key the runs do not vary, or no key, is an error."""
    proto = {
        "factors": ["model/ffn", "model/norm"],
        "design": "grid",
        "seeds": [1, 2, 3],
        "baseline": "model/ffn=gelu,model/norm=layernorm",
        "comparisons": "factor:model/norm",
    }
    for ffn in ("gelu", "swiglu", "relu"):
        for norm in ("layernorm", "rmsnorm"):
            for seed in (1, 2, 3):
                t = (
                    2.0
                    + 0.01 * seed
                    + 0.1 * (ffn == "swiglu")
                    - (0.2 + 0.01 * seed**2) * (norm == "rmsnorm")
                )
                write_run(
                    tmp_path / "s",
                    [f"model/ffn={ffn}", f"model/norm={norm}", f"seed={seed}"],
                    config={"protocol": proto},
                    metrics=completed(t, t),
                )
    files = make_report([tmp_path / "s"], tmp_path / "out")
    report = files.report
    label = lambda ffn, norm: f"model/ffn={ffn}, model/norm={norm}"  # noqa: E731
    primary = [c for c in report.comparisons if c.metric == "test/loss"]
    # the baseline is the reference of its own pair; in the others the later-listed variant (rmsnorm) is the variant
    assert {(c.variant, c.reference) for c in primary} == {
        (label(f, "rmsnorm"), label(f, "layernorm")) for f in ("gelu", "swiglu", "relu")
    }
    # Holm's family: the three pairs alone, not the 5 baseline comparisons
    assert report.sizes["test/loss"] == len(primary) == 3
    # mean of 0.2 + 0.01 seed^2
    assert all(c.delta == pytest.approx(-(0.2 + 0.01 * 14 / 3)) for c in primary)
    rows = {r.label: r for r in report.rows}
    assert (
        rows[label("gelu", "rmsnorm")].comparison is not None
        and rows[label("swiglu", "layernorm")].comparison is None
    )
    md = files.markdown.read_text()
    assert (
        "every pair of variants that differ in `model/norm` alone" in md
        and "## Pairs that differ in one factor" in md
    )
    with pytest.raises(
        ConfigError,
        match="'model/attention' is not a factor these runs vary; they vary model/ffn, model/norm",
    ):
        make_report([tmp_path / "s"], tmp_path / "bad", comparisons="factor:model/attention")
    with pytest.raises(
        ConfigError,
        match="protocol.comparisons='factor:' is not known; use one of baseline, "
        "one_factor, factor:<key>",
    ):
        make_report([tmp_path / "s"], tmp_path / "bad", comparisons="factor:")


def test_the_command_line_contract(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m src.report <sweep dir>… --tune optim.lr --baseline <override>`` on a sweep that declares no
    protocol; --ignore adds keys to the ignored ones (the seed still never defines a variant)."""
    from src.report import main

    root = grid_sweep(tmp_path / "sweep", protocol=None)
    for run in root.iterdir():  # a bookkeeping override that varies between seeds
        overrides = run / ".hydra" / "overrides.yaml"
        overrides.write_text(
            overrides.read_text() + f"- data.num_workers={int(run.name[-1]) % 2}\n"
        )
    # it splits the variants
    assert len(make_report([root], tmp_path / "split", tune=["optim.lr"]).report.rows) == 4
    files = main(
        [
            str(root),
            "--tune",
            "optim.lr",
            "--baseline",
            "model/ffn=gelu",
            "--ignore",
            "data.num_workers",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert "wrote" in capsys.readouterr().out
    table = read_csv(files.csv)
    assert [r["variant"] for r in table] == ["model/ffn=gelu", "model/ffn=swiglu"]
    assert list(table[0]) == [*REPORT_COLUMNS, "optim.lr"] and [r["optim.lr"] for r in table] == [
        "0.002",
        "0.004",
    ]
    assert table[0]["verdict"] == "baseline" and int(table[1]["n_seeds"]) == 3
    assert {p.name for p in (tmp_path / "out").iterdir()} >= {
        "report.md",
        "report.csv",
        "runs.csv",
        "comparisons.csv",
        "tuning.csv",
        "references.csv",
        "tuning_optim_lr.png",
        "loss_vs_tokens.png",
    }
    # a baseline that names no variant: one clear line, status 2
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                str(root),
                "--tune",
                "optim.lr",
                "--baseline",
                "model/ffn=relu",
                "--out",
                str(tmp_path / "out"),
            ]
        )
    assert (
        exit_info.value.code == 2
        and "--baseline 'model/ffn=relu' matches no variant" in capsys.readouterr().err
    )


def test_a_report_never_misleads_on_small_sweeps(tmp_path: Path) -> None:
    """One seed per variant, one validation per run, a protocol that says params while the runs were
    not matched: no 'Holm over 0', the header's matching is the runs', one marker per validation, and
    the report says once that a verdict needs more seeds."""
    root = tmp_path / "sweep"
    proto = {**PROTOCOL, "tune": {}, "seeds": [1]}
    for ffn, v in (("gelu", 2.0), ("swiglu", 1.9), ("relu", 2.1)):
        write_run(
            root,
            [f"model/ffn={ffn}", "seed=1"],
            config={"protocol": proto},
            metrics=completed(v, v),
            val_history=[(100, v)],
            budget={"flops_per_token": 6000.0},
        )
    files = make_report([root], tmp_path / "out", comparisons="one_factor")
    md = files.markdown.read_text()
    assert "over all 0" not in md and "No comparison has a test" in md
    assert "Matching: none (the runs' budget.json; protocol.match=params" in md
    # three pairs, one reason: said once, with the count
    assert (
        "Too few seeds for a verdict" in md
        and "all 3 comparisons: no spread to plan from (1 seed on one side)" in md
    )
    assert md.count("no spread to plan from") == 1
    assert (
        tmp_path / "out" / "loss_vs_tokens.png"
    ).stat().st_size > 1000  # a single validation point, drawn


def test_seeds_needed_at_the_observed_spread_and_the_factorial_hint(tmp_path: Path) -> None:
    from scipy import stats

    from src.reporting.stats import seeds_needed

    # by hand: the smallest n whose Welch power at |Δ| reaches 80 %
    def power(n: int, delta: float, sd: float) -> float:
        se, df = math.sqrt(2 * sd**2 / n), 2 * (n - 1)
        crit = stats.t.ppf(0.975, df)
        return stats.nct.sf(crit, df, delta / se) + stats.nct.cdf(-crit, df, delta / se)

    n = seeds_needed(0.05, 0.05, 0.05)
    assert power(n, 0.05, 0.05) >= 0.8 > power(n - 1, 0.05, 0.05)
    assert seeds_needed(0.05, 0.01, paired=True) < n  # a tight pairing needs fewer seeds
    # a 2 x 2 grid compared only against the baseline gets the one_factor hint
    root = tmp_path / "grid"
    for ffn in ("gelu", "swiglu"):
        for norm in ("layernorm", "rmsnorm"):
            for seed, v in ((1, 2.0), (2, 2.1)):
                write_run(
                    root,
                    [f"model/ffn={ffn}", f"model/norm={norm}", f"seed={seed}"],
                    metrics=completed(v, v),
                )
    md = make_report(
        [root], tmp_path / "out", baseline="model/ffn=gelu,model/norm=layernorm"
    ).markdown.read_text()
    assert (
        "This sweep is factorial (2 `model/ffn` × 2 `model/norm`)" in md
        and "--comparisons one_factor" in md
    )


def test_the_report_names_the_scored_weights_and_counts_tokens_up_to_them(tmp_path: Path) -> None:
    """A run tested with its best checkpoint at step 100 of 150 (metrics.json's scored_weights/scored_step):
    the verdict section says so, and the compute table counts 100/150 of its tokens."""
    root = tmp_path / "sweep"
    for ffn, v in (("gelu", 2.0), ("swiglu", 1.9)):
        for seed in (1, 2):
            write_run(
                root,
                [f"model/ffn={ffn}", f"seed={seed}"],
                budget={"flops_per_token": 10.0},
                metrics={
                    **completed(v + seed / 100, v + seed / 100),
                    "global_step": 150,
                    "tokens_seen": 1500,
                    "scored_weights": "best",
                    "scored_step": 100,
                },
            )
    files = make_report([root], tmp_path / "out", baseline="model/ffn=gelu")
    md = files.markdown.read_text()
    assert "Weights the verdict scored: best by validation at step 100 (4 runs)" in md
    assert all(row.compute.tokens.mean == pytest.approx(1000.0) for row in files.report.rows)
    assert all(row.compute.train_flops.mean == pytest.approx(10_000.0) for row in files.report.rows)
    runs = read_csv(files.runs_csv)
    assert {r["scored_weights"] for r in runs} == {"best"} and {r["scored_step"] for r in runs} == {
        "100"
    }


def test_the_share_of_diverged_seeds_stands_beside_the_loss(tmp_path: Path) -> None:
    """Issue 27: a variant that diverges on some seeds is never hidden by the mean over the survivors."""
    root = tmp_path / "sweep"
    cfg = {
        "protocol": {
            "factors": ["model.norm_placement"],
            "design": "grid",
            "seeds": [1, 2, 3, 4, 5],
            "baseline": "model.norm_placement=pre",
        }
    }
    for seed in range(1, 6):
        write_run(
            root,
            ["model.norm_placement=pre", f"seed={seed}"],
            config=cfg,
            metrics=completed(2.0 + 0.01 * seed, 2.0 + 0.01 * seed),
            val_history=[(100, 2.0)],
        )
        blown = seed in (2, 4)  # 2 of 5 seeds: a NaN final loss (metrics.json writes it as null)
        write_run(
            root,
            ["model.norm_placement=post", f"seed={seed}"],
            config=cfg,
            metrics={**completed(1.9, 1.9), "val/loss": None, "test/loss": None}
            if blown
            else completed(1.9 + 0.01 * seed, 1.9 + 0.01 * seed),
            val_history=[(100, math.nan if blown else 1.9)],
        )
    files = make_report([root], tmp_path / "out")
    table = {r["variant"]: r for r in read_csv(files.csv)}
    post, pre = table["model.norm_placement=post"], table["model.norm_placement=pre"]
    assert (post["n_seeds"], post["n_diverged"], float(post["diverged_share"])) == (
        "3",
        "2",
        pytest.approx(0.4),
    )
    assert (pre["n_seeds"], pre["n_diverged"], float(pre["diverged_share"])) == ("5", "0", 0.0)
    verdict_rows = [
        line
        for line in files.markdown.read_text().splitlines()
        if line.startswith("| model.norm_placement=post")
    ]
    assert any("**2/5**" in line and "3 ok, 2 diverged" in line for line in verdict_rows)


def test_a_metric_is_drawn_against_a_numeric_factor(tmp_path: Path) -> None:
    """Issue 27: the last/first gradient-norm ratio against depth, one line per placement."""
    root = tmp_path / "sweep"
    cfg = {
        "protocol": {
            "factors": ["model.norm_placement", "model.n_layer"],
            "design": "grid",
            "seeds": [1, 2],
            "baseline": "model.norm_placement=pre,model.n_layer=2",
        }
    }
    for placement in ("pre", "post"):
        for depth in (2, 6, 12):
            for seed in (1, 2):
                write_run(
                    root,
                    [f"model.norm_placement={placement}", f"model.n_layer={depth}", f"seed={seed}"],
                    config=cfg,
                    metrics=completed(2.0 + depth / 100, 2.0 + depth / 100 + seed / 1000),
                    val_history=[(100, 2.0)],
                )
    files = make_report([root], tmp_path / "out")
    plot = files.plots["test/loss vs model.n_layer"]
    assert (
        plot is not None
        and plot.name == "test_loss_vs_model.n_layer.png"
        and plot.stat().st_size > 5000
    )
    # a two-valued factor gets no trend plot
    assert "model.norm_placement vs model.n_layer" not in " ".join(files.plots)


def test_fixed_compares_every_tuned_value_as_its_own_variant(tmp_path: Path) -> None:
    """--fixed (an ablation at fixed values): the declared tuned key defines variants, nothing is selected, and
    each variant's verdict runs are all its runs; the paired delta is over the shared seeds."""
    files = make_report(
        [grid_sweep(tmp_path / "sweep")],
        tmp_path / "out",
        fixed=True,
        baseline="model/ffn=gelu,optim.lr=2e-3",
    )
    rows = {r.label: r for r in files.report.rows}
    assert len(rows) == 6 and "model/ffn=swiglu, optim.lr=4e-3" in rows
    assert all(r.tuned.chosen == {} and len(r.tuned.verdict_runs) == 3 for r in rows.values())
    assert "Tuned per variant: nothing. Design: fixed values" in files.markdown.read_text()
    runs = read_csv(files.runs_csv)
    test = {(r["variant"], r["seed"]): float(r["test/loss"]) for r in runs}
    a = [
        test[("model/ffn=gelu, optim.lr=4e-3", s)] - test[("model/ffn=gelu, optim.lr=2e-3", s)]
        for s in "123"
    ]
    row = {r["variant"]: r for r in read_csv(files.csv)}["model/ffn=gelu, optim.lr=4e-3"]
    assert float(row["delta"]) == pytest.approx(np.mean(a))
    with pytest.raises(ValueError, match="--fixed"):
        make_report([tmp_path / "sweep"], tmp_path / "out2", fixed=True, tune=["optim.lr"])
