"""Declared families and interactions (src/reporting/families.py): Holm over the declared questions
alone, identical pairs in no family, an interaction's row equal to the hand computation of the
difference of paired differences, and one line for each bad declaration."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from src.errors import ConfigError
from src.report import make_report
from src.reporting.comparisons import IDENTICAL, PRIMARY, holm
from tests.reporting.fake_runs import completed, write_run

REPO = Path(__file__).resolve().parents[2]
SEEDS = (1, 2, 3, 4)


def _loss(ffn: str, cond: str, seed: int) -> float:
    """SwiGLU helps far more under the first condition than the second (an interaction), with seed
    noise."""
    noise = {1: 0.011, 2: -0.004, 3: 0.007, 4: -0.009}[seed]
    first = cond in ("plain", "layernorm")
    gain = (0.1 + 0.01 * seed) if first else 0.003 * seed
    return 2.0 + noise - gain * (ffn == "swiglu")


def _sweep(root: Path, factor: str = "data.format", **protocol: Any) -> Path:
    """model/ffn x ``factor`` (data.format: plain | marked, which changes the batches; model/norm:
    layernorm | rmsnorm, which does not)."""
    values = ("plain", "marked") if factor == "data.format" else ("layernorm", "rmsnorm")
    proto = {
        "factors": ["model/ffn", factor],
        "design": "grid",
        "seeds": list(SEEDS),
        "baseline": f"model/ffn=gelu,{factor}={values[0]}",
        "comparisons": "one_factor",
        **protocol,
    }
    for ffn in ("gelu", "swiglu"):
        for cond in values:
            for seed in SEEDS:
                t = _loss(ffn, cond, seed)
                write_run(
                    root,
                    [f"model/ffn={ffn}", f"{factor}={cond}", f"seed={seed}"],
                    config={"protocol": proto},
                    metrics=completed(t, t, **{"grad_norm/step0": 1.5 + 0.1 * seed}),
                )
    return root


INTERACTION = {
    "id": "format_moves_swiglu",
    "variant": "model/ffn=swiglu",
    "reference": "model/ffn=gelu",
    "factor": "data.format",
    "conditions": ["plain", "marked"],
}


def test_holm_runs_over_the_declared_questions_alone(tmp_path: Path) -> None:
    primary = [
        {
            "id": "swiglu_plain",
            "variant": "model/ffn=swiglu,data.format=plain",
            "reference": "model/ffn=gelu,data.format=plain",
            "expect": "better",
        },
        {
            "id": "swiglu_marked",
            "variant": "model/ffn=swiglu,data.format=marked",
            "reference": "model/ffn=gelu,data.format=marked",
        },
    ]
    sweep = _sweep(
        tmp_path / "s", primary=primary, interactions=[INTERACTION], secondary=["grad_norm/*"]
    )
    files = make_report([sweep], tmp_path / "out")
    report = files.report
    rows = {c.row: c for c in report.comparisons}
    first = [c for c in report.comparisons if c.family == PRIMARY]
    assert sorted(c.row for c in first) == ["swiglu_marked", "swiglu_plain"]
    assert report.sizes[PRIMARY] == 2
    assert [rows["swiglu_plain"].p_holm, rows["swiglu_marked"].p_holm] == pytest.approx(
        holm([rows["swiglu_plain"].p, rows["swiglu_marked"].p])
    )
    assert rows["swiglu_plain"].verdict == "better" and rows["swiglu_plain"].expect == "better"
    # a secondary interaction is exploratory, in a family of its own
    assert rows["format_moves_swiglu"].family == "interactions: test/loss"
    # the step-0 diagnostic does not depend on the FFN: pairs on the same batches that differ in the
    # FFN alone are identical by construction, in no family; across formats the batches differ, so
    # the same numbers are a (poor) test, not a construction
    step0 = [c for c in report.comparisons if c.metric == "grad_norm/step0"]
    same = [c for c in step0 if c.family == IDENTICAL]
    assert len(same) == 2 and all(c.p is None and "data.format" not in c.pairing_note for c in same)
    assert all(c.family == "grad_norm/step0" for c in step0 if c not in same)
    md = files.markdown.read_text()
    first_table = md.index("| question |")
    assert first_table < md.index("| variant |") and "Identical by construction" in md
    with open(tmp_path / "out" / "comparisons.csv") as f:
        csv_rows = {r["row"]: r for r in csv.DictReader(f)}
    assert csv_rows["swiglu_plain"]["family"] == PRIMARY


def test_an_interaction_is_the_difference_of_paired_differences(tmp_path: Path) -> None:
    """model/norm leaves the batches alone: the four variants pair by seed, and the interaction is
    the one-sample test of I_s = (A_x - B_x) - (A_y - B_y)."""
    declared = {**INTERACTION, "factor": "model/norm", "conditions": ["layernorm", "rmsnorm"]}
    sweep = _sweep(tmp_path / "s", "model/norm", interactions=[{**declared, "family": "primary"}])
    report = make_report([sweep], tmp_path / "out").report
    c = next(c for c in report.comparisons if c.row == "format_moves_swiglu")
    per_seed = [
        (_loss("swiglu", "layernorm", s) - _loss("gelu", "layernorm", s))
        - (_loss("swiglu", "rmsnorm", s) - _loss("gelu", "rmsnorm", s))
        for s in SEEDS
    ]
    assert c.family == PRIMARY and c.test == "paired" and c.pairs == len(SEEDS)
    assert c.delta == pytest.approx(np.mean(per_seed))
    one_sample = stats.ttest_1samp(per_seed, 0.0)
    assert c.p == pytest.approx(one_sample.pvalue)
    low, high = one_sample.confidence_interval(0.95)
    assert (c.delta_ci_low, c.delta_ci_high) == pytest.approx((low, high))


def test_an_interaction_across_data_formats_compares_the_differences_unpaired(
    tmp_path: Path,
) -> None:
    """data.format changes the batches: each condition's difference is paired by seed, the two
    conditions' differences are compared unpaired (Welch)."""
    sweep = _sweep(tmp_path / "s", interactions=[INTERACTION])
    report = make_report([sweep], tmp_path / "out").report
    c = next(c for c in report.comparisons if c.row == "format_moves_swiglu")
    d = {
        cond: [_loss("swiglu", cond, s) - _loss("gelu", cond, s) for s in SEEDS]
        for cond in ("plain", "marked")
    }
    assert c.test == "welch" and "different batches" in c.pairing_note
    assert c.delta == pytest.approx(np.mean(d["plain"]) - np.mean(d["marked"]))
    assert c.p == pytest.approx(stats.ttest_ind(d["plain"], d["marked"], equal_var=False).pvalue)


@pytest.mark.parametrize(
    "protocol, message",
    [
        (
            {"primary": [{"id": "q", "variant": "model/ffn=relu", "reference": "model/ffn=gelu"}]},
            "protocol.primary[0].variant='model/ffn=relu' names no variant the runs have",
        ),
        (
            {
                "primary": [
                    {"id": "q", "variant": "model/ffn=swiglu", "reference": "model/ffn=gelu"}
                ]
            },
            "names 2 variants",
        ),
        (
            {"interactions": [{**INTERACTION, "factor": "optim.lr"}]},
            "protocol.interactions[0].factor='optim.lr' is not a factor these runs vary",
        ),
        (
            {"interactions": [{**INTERACTION, "conditions": ["plain", "fancy"]}]},
            "'fancy' is not a value of data.format in these runs",
        ),
    ],
)
def test_a_question_the_runs_cannot_answer_is_one_line(
    tmp_path: Path, protocol: dict[str, Any], message: str
) -> None:
    sweep = _sweep(tmp_path / "s", **protocol)
    with pytest.raises(ConfigError) as e:
        make_report([sweep], tmp_path / "out")
    assert message in str(e.value) and "\n" not in str(e.value)


@pytest.mark.slow
def test_study_1_primary_family_holds_its_questions_and_the_step0_ratios_none(
    tmp_path: Path,
) -> None:
    """On the committed runs of study 1 with its questions file: the primary family is the declared
    test/loss contrasts and the interaction alone; the 34 step-0 gradient ratios whose pairs differ
    only in warmup or the optimizer (the same initialisation) are in no family."""
    runs = REPO / "experiments" / "01_norm_placement" / "runs" / "cpu" / "main"
    questions = REPO / "experiments" / "01_norm_placement" / "questions.yaml"
    report = make_report([runs], tmp_path / "out", questions=questions).report
    first = [c for c in report.comparisons if c.family == PRIMARY]
    assert {c.metric for c in first} == {"test/loss"} and len(first) == report.sizes[PRIMARY] == 4
    same = [c for c in report.comparisons if c.family == IDENTICAL]
    assert len(same) == 34 and all(c.metric.startswith("grad_norm/") for c in same)
    assert all(c.p is None and c.p_holm is None for c in same)
    # the interaction row against the runs' own numbers
    c = next(c for c in first if c.row == "warmup_matters_more_for_post_ln")
    by = {(r.label, r2.seed): r2.metric("test/loss") for r in report.rows for r2 in r.runs}
    label = "model.norm_placement={}, optim=adamw, scheduler.warmup_steps={}".format
    seeds = sorted({s for (_, s) in by}, key=str)
    per_seed = [
        (by[label("post", 0), s] - by[label("post", 100), s])
        - (by[label("pre", 0), s] - by[label("pre", 100), s])
        for s in seeds
        if (label("post", 0), s) in by and (label("pre", 100), s) in by
    ]
    assert len(per_seed) == 5 and c.delta == pytest.approx(np.mean(per_seed))
    assert c.p == pytest.approx(stats.ttest_1samp(per_seed, 0.0).pvalue)


def _plain_sweep(root: Path, test_loss: float | None, bigram: float) -> Path:
    for ffn in ("gelu", "swiglu"):
        for seed in SEEDS:
            t = None if test_loss is None else test_loss + 0.01 * seed + 0.05 * (ffn == "swiglu")
            write_run(
                root,
                [f"model/ffn={ffn}", f"seed={seed}"],
                config={"protocol": {"factors": ["model/ffn"], "seeds": list(SEEDS)}},
                metrics=completed(2.0 + 0.01 * seed, t),
                ngram={
                    "val": {"2": {"loss": bigram, "tokens": 100}},
                    "test": {"2": {"loss": bigram, "tokens": 100}},
                },
            )
    return root


def test_a_report_below_the_bigram_row_opens_as_a_smoke_test(tmp_path: Path) -> None:
    md = make_report([_plain_sweep(tmp_path / "s", 3.0, 2.5)], tmp_path / "out").markdown
    second = md.read_text().split("\n")[2]
    assert second.startswith("**A smoke test, not evidence about architectures:**")
    fine = make_report([_plain_sweep(tmp_path / "t", 2.0, 2.5)], tmp_path / "out2").markdown
    assert "smoke test" not in fine.read_text()


def test_runs_without_a_test_metric_get_the_validation_command(tmp_path: Path) -> None:
    md = make_report([_plain_sweep(tmp_path / "s", None, 2.5)], tmp_path / "out").markdown
    text = md.read_text()
    assert text.split("\n")[2].startswith("**No run has `test/loss`**")
    assert "--metric val/loss" in text and "Too few seeds" not in text


def test_the_report_states_the_exact_test_and_its_resamples(tmp_path: Path) -> None:
    for ffn, hits in (("gelu", [0.0, 0.0, 1.0, 0.0]), ("swiglu", [1.0, 1.0, 1.0, 0.0])):
        for seed, acc in zip(SEEDS, hits):
            write_run(
                tmp_path / "s",
                [f"model/ffn={ffn}", f"seed={seed}"],
                config={"protocol": {"factors": ["model/ffn"], "metric": "test/acc"}},
                metrics=completed(2.0, 2.0, **{"test/acc": acc}),
            )
    files = make_report([tmp_path / "s"], tmp_path / "out", metric="test/acc")
    c = next(c for c in files.report.comparisons if c.metric == "test/acc")
    assert c.test == "sign-flip" and c.exact and c.p_floor == pytest.approx(2 / 2**4)
    text = files.markdown.read_text()
    assert "the sign-flip test (by seed; BCa bootstrap interval, 9,999 resamples)" in text
    assert "the permutation tests enumerate every assignment" in text
