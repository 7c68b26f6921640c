"""Evaluation-time variants (``python -m src.report --eval-variants``): a RoPE scaling applied at
evaluation time becomes a variant of its own, made of the same runs' weights, so "RoPE + YaRN at 2x
vs sinusoidal at 2x" is a tested comparison, paired by seed (src/studies/eval_variants.py)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from src.errors import ConfigError
from src.report import main, make_report
from src.studies.outcomes import run_outcome
from tests.reporting.fake_runs import completed, write_run

SEEDS = (1, 2, 3)
LRS = ("1e-3", "2e-3")
# val/loss[position][lr] per seed: rope chooses 2e-3, sinusoidal 1e-3
VAL = {
    "rope": {"1e-3": [2.00, 2.02, 2.01], "2e-3": [1.90, 1.91, 1.92]},
    "sinusoidal": {"1e-3": [2.10, 2.13, 2.11], "2e-3": [2.20, 2.21, 2.22]},
}
PROTOCOL = {
    "factors": ["model/position"],
    "tune": {"optim.lr": [1e-3, 2e-3]},
    "design": "grid",
    "seeds": list(SEEDS),
    "baseline": "model/position=sinusoidal",
    "secondary": ["extrapolation/ppl@*"],
}
ROPE = "model/position=rope"
YARN = "model/position=rope, eval.rope_scaling=yarn"
SIN = "model/position=sinusoidal"


def ppl(position: str, lr: str, seed: int, scaling: str | None = None) -> dict[str, float | None]:
    """Perplexities at 1x, 2x, 4x (chosen so that the per-seed differences vary: a paired test has a spread)."""
    j = LRS.index(lr)
    # the callback's scaled run, here without its 1x (the unscaled one stands in)
    if scaling == "yarn" and position == "rope":
        return {"2x": 9.0 + 0.3 * seed**2 + j, "4x": 12.0 + 0.7 * seed + 0.2 * seed**2 + j}
    if scaling is not None:  # not applicable to sinusoidal positions
        return {"1x": None, "2x": None, "4x": None}
    base = 7.0 + 0.1 * seed * (1 + j) + j
    return {
        "1x": base,
        "2x": base * (5 if position == "rope" else 6) + seed,
        "4x": base * 20 + 2 * seed,
    }


def extrapolation_metrics(position: str, lr: str, seed: int) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for scaling in (None, "yarn"):
        prefix = "extrapolation" if scaling is None else f"extrapolation/{scaling}"
        for tag, v in ppl(position, lr, seed, scaling).items():
            out[f"{prefix}/ppl@{tag}"] = v
            out[f"{prefix}/loss@{tag}"] = None if v is None else math.log(v)
            if v is None:
                out[f"{prefix}/note@{tag}"] = (
                    "not applicable: sinusoidal positions have no rotary frequencies"
                )
    return out


def sweep(root: Path, scalings: bool = True) -> Path:
    for position, by_lr in VAL.items():
        for lr, vals in by_lr.items():
            for seed, v in zip(SEEDS, vals):
                extra = extrapolation_metrics(position, lr, seed)
                if not scalings:
                    extra = {k: x for k, x in extra.items() if "/yarn/" not in k}
                write_run(
                    root,
                    [f"model/position={position}", f"optim.lr={lr}", f"seed={seed}"],
                    config={"protocol": PROTOCOL},
                    metrics=completed(v, v + 0.01 * seed, **extra),
                    val_history=[(50, v + 0.5), (100, v)],
                    budget={"flops_per_token": 6000.0, "match": "params"},
                )
    return root


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_a_scaling_is_a_variant_of_the_same_weights_paired_by_seed(tmp_path: Path) -> None:
    files = make_report([sweep(tmp_path / "sweep")], tmp_path / "out", eval_variants=True)
    rows = {r.label: r for r in files.report.rows}
    assert (
        set(rows) == {ROPE, YARN, SIN}
        and rows[YARN].evaluation_of == ROPE
        and rows[ROPE].evaluation_of is None
    )
    # selection on val/loss: the same weights, the same choice
    assert rows[YARN].tuned.chosen == rows[ROPE].tuned.chosen == {"optim.lr": "0.002"}
    assert rows[SIN].tuned.chosen == {"optim.lr": "0.001"}
    derived = {int(r.seed): r for r in rows[YARN].runs}
    assert sorted(derived) == list(SEEDS) and all(
        r.path == r.evaluation_of.path for r in derived.values()
    )
    yarn = {s: ppl("rope", "2e-3", s, "yarn") for s in SEEDS}
    sin = {s: ppl("sinusoidal", "1e-3", s) for s in SEEDS}
    for s in SEEDS:
        assert derived[s].metric("extrapolation/ppl@2x") == yarn[s]["2x"]
        assert derived[s].metric("extrapolation/loss@4x") == pytest.approx(math.log(yarn[s]["4x"]))
        # no scaled 1x: unscaled
        assert derived[s].metric("extrapolation/ppl@1x") == ppl("rope", "2e-3", s)["1x"]
        assert "test/loss" not in derived[s].metrics and not any(
            "/yarn/" in k for k in derived[s].metrics
        )
        assert derived[s].metric("val/loss") == derived[s].evaluation_of.metric("val/loss")
    comps = files.report.comparisons
    at_2x = next(
        c
        for c in comps
        if c.variant == YARN and c.reference == SIN and c.metric == "extrapolation/ppl@2x"
    )
    assert (
        at_2x.test == "paired"
        and at_2x.pairs == 3
        and at_2x.p is not None
        and at_2x.p_holm is not None
    )
    assert at_2x.delta == pytest.approx(np.mean([yarn[s]["2x"] - sin[s]["2x"] for s in SEEDS]))
    # test/* are the parent's own numbers and the unscaled 1x repeats the parent's: no comparison of either
    assert not [
        c
        for c in comps
        if YARN in (c.variant, c.reference) and c.metric in ("test/loss", "extrapolation/ppl@1x")
    ]
    assert {c.metric for c in comps if c.variant == YARN} == {
        "extrapolation/ppl@2x",
        "extrapolation/ppl@4x",
    }
    assert {c.metric for c in comps if c.variant == ROPE} == {
        "test/loss",
        "extrapolation/ppl@1x",
        "extrapolation/ppl@2x",
        "extrapolation/ppl@4x",
    }
    # a family per metric (none declared primary): 6 tests in all
    assert sum(files.report.sizes.values()) == 6 and not any(
        c["variant"] == YARN and c["metric"] == "test/loss"
        for c in read_csv(files.files["comparisons.csv"])
    )
    # runs.csv: the derived rows say whose weights they are, and carry no training compute of their own
    runs = read_csv(files.runs_csv)
    assert len(runs) == 12 + 6 and [k for k in runs[0]][:4] == ["variant", "seed", "stage", "role"]
    marked = [r for r in runs if r["evaluation_of"]]
    assert (
        len(marked) == 6
        and {r["variant"] for r in marked} == {YARN}
        and {r["evaluation_of"] for r in marked} == {ROPE}
    )
    assert all(r["train_flops"] == "" and r["wall_time_s"] == "" for r in marked)
    assert {
        r["seed"]: float(r["extrapolation/ppl@2x"]) for r in marked if "verdict" in r["role"]
    } == {str(s): yarn[s]["2x"] for s in SEEDS}
    md = files.markdown.read_text()
    assert "`--eval-variants`" in md and "same trained weights" in md
    assert "12 runs in 2 variants and 1 evaluation-time variant" in md
    # the unscaled 1x in the secondary table
    assert "not compared: model/position=rope's own figure" in md
    assert len(files.runs) == 12  # the runs read; the derived ones are not training runs


def test_one_factor_pairs_a_scaling_with_its_unscaled_variant(tmp_path: Path) -> None:
    files = make_report(
        [sweep(tmp_path / "sweep")], tmp_path / "out", eval_variants=True, comparisons="one_factor"
    )
    own = [c for c in files.report.comparisons if {c.variant, c.reference} == {YARN, ROPE}]
    assert {c.metric for c in own} == {"extrapolation/ppl@2x", "extrapolation/ppl@4x"} and all(
        c.test == "paired" for c in own
    )
    at_4x = next(c for c in own if c.metric == "extrapolation/ppl@4x")
    assert at_4x.delta == pytest.approx(
        np.mean(
            [ppl("rope", "2e-3", s, "yarn")["4x"] - ppl("rope", "2e-3", s)["4x"] for s in SEEDS]
        )
        * (1 if at_4x.variant == YARN else -1)
    )


def test_the_per_scaling_secondary_metrics_leave_the_report_with_eval_variants(
    tmp_path: Path,
) -> None:
    """Study 2's protocol lists "extrapolation/*/ppl@*" for reports without the flag; with it, each scaling's figures
    are its variant's extrapolation/ppl@*, and a table per scaling would repeat them for RoPE alone."""
    root = sweep(tmp_path / "sweep")
    listed = ["extrapolation/ppl@*", "extrapolation/*/ppl@*"]
    files = make_report([root], tmp_path / "out", eval_variants=True, extra=listed)
    assert (
        not any(k.count("/") > 1 for k in files.report.secondary)
        and "extrapolation/ppl@2x" in files.report.secondary
    )
    assert "### `extrapolation/yarn/ppl@2x`" not in files.markdown.read_text()
    # without the flag they are the only scaled figures
    plain = make_report([root], tmp_path / "plain", extra=listed)
    assert "extrapolation/yarn/ppl@2x" in plain.report.secondary


def test_a_diverged_seed_without_scaled_figures_keeps_the_parents_choice(tmp_path: Path) -> None:
    root = sweep(tmp_path / "sweep")
    # rope at 1e-3 would win on the mean val/loss, but seed 3 diverged there (no figures at all): +inf, not chosen
    path = root / "model.position=rope,optim.lr=1e-3,seed=1" / "metrics.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "val/loss": 1.5}))
    # left out of the mean
    (root / "model.position=rope,optim.lr=1e-3,seed=2" / "metrics.json").write_text(
        '{"status": "failed", "error": "RuntimeError: out of memory"}'
    )
    (root / "model.position=rope,optim.lr=1e-3,seed=3" / "metrics.json").write_text(
        '{"status": "failed", "error": "NonFiniteLossError: non-finite training loss at step 40"}'
    )
    files = make_report([root], tmp_path / "out", eval_variants=True)
    rows = {r.label: r for r in files.report.rows}
    assert rows[ROPE].tuned.chosen == rows[YARN].tuned.chosen == {"optim.lr": "0.002"}
    by_seed = {(r.overrides["optim.lr"], r.seed): r for r in rows[YARN].variant.runs}
    assert run_outcome(by_seed[("1e-3", "3")]) == "diverged"
    assert run_outcome(by_seed[("1e-3", "2")]) == "failed"
    # listed once, not once per variant
    assert files.markdown.read_text().count("RuntimeError: out of memory") == 1


def test_eval_variants_without_scaled_figures_name_the_flag_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = sweep(tmp_path / "sweep", scalings=False)
    with pytest.raises(ConfigError) as e:
        make_report([root], tmp_path / "out", eval_variants=True)
    assert (
        "--eval-variants" in str(e.value)
        and "scalings" in str(e.value)
        and "callbacks.extrapolation" in str(e.value)
    )
    with pytest.raises(SystemExit) as exit_info:
        main([str(root), "--eval-variants", "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2 and "--eval-variants" in capsys.readouterr().err
    # without the flag: the variants of the sweep, nothing derived
    files = make_report([root], tmp_path / "plain")
    assert [r.label for r in files.report.rows] == [ROPE, SIN] and all(
        r["evaluation_of"] == "" for r in read_csv(files.runs_csv)
    )
