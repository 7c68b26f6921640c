"""``python -m src.study``: the stages it plans from a study's protocol, and a real 2-variant x
3-learning-rate x 3-seed quickstart study whose report recomputes, number by number, from its
runs.csv (numpy and scipy here, not the report's code)."""

from __future__ import annotations

import csv
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from src.errors import ConfigError
from src.studies.stages import run_commands, tune_commands
from src.study import confirm_commands, plan
from tests.reporting.fake_runs import completed, write_run

REPO = Path(__file__).resolve().parents[1]


def test_a_factor_with_one_value_is_a_one_value_sweep(tmp_path: Path) -> None:
    """Study 1's optimizer factor: `optim: adamw` in the sweeper params, `optim=muon` in a second invocation."""
    p = plan(["experiment=study_norm", f"hydra.sweep.dir={tmp_path}"])
    assert len(p.variants) == 10 and all(v["optim"] == "adamw" for v in p.variants)
    q = plan(
        [
            "experiment=study_norm",
            "optim=muon",
            "model.norm_placement=pre,post",
            f"hydra.sweep.dir={tmp_path}",
        ]
    )
    assert len(q.variants) == 4 and all(v["optim"] == "muon" for v in q.variants)
    (tune,) = tune_commands(q)
    assert tune.count("optim=muon") == 1 and "optim=adamw" not in tune


def test_a_plain_value_on_the_command_line_replaces_a_swept_key_of_the_config(
    tmp_path: Path,
) -> None:
    """Study 2 runs one task at a time: `+experiment/.../task=addition` narrows the config's sweep of five tasks (it
    once stayed a fixed override while the config's five-task sweep ran as well, 150 jobs instead of 30)."""
    task = "+experiment/study_length_generalization/task"
    p = plan(
        [
            "experiment=study_length_generalization",
            f"{task}=addition",
            f"hydra.sweep.dir={tmp_path}",
        ]
    )
    assert len(p.variants) == 6 and {v[task] for v in p.variants} == {"addition"}
    assert not any(o.startswith(task) for o in p.fixed)
    (tune,) = tune_commands(p)
    assert [a for a in tune if a.startswith(task)] == [f"{task}=addition"]
    assert list(p.variants[0]) == [
        task,
        "model/position",
    ]  # the config's order of the swept keys stays
    q = plan(
        [
            "experiment=study_length_generalization",
            f"{task}=copy,mqar",
            f"hydra.sweep.dir={tmp_path}",
        ]
    )
    assert len(q.variants) == 12 and {v[task] for v in q.variants} == {"copy", "mqar"}


def test_plan_of_a_two_stage_study(tmp_path: Path) -> None:
    p = plan(["experiment=study_ffn_norm", f"hydra.sweep.dir={tmp_path}"])
    assert p.sweep_dir == tmp_path and p.protocol.design == "two_stage" and len(p.variants) == 4
    (tune,) = tune_commands(p)
    assert tune[1:4] == ["-m", "src.train", "-m"]
    assert {
        "model/ffn=gelu,swiglu",
        "model/norm=layernorm,rmsnorm",
        "optim.lr=0.001,0.002,0.004",
        "seed=0",
        "protocol.stage=tune",
    } <= set(tune)
    # the confirm stage reads the tune stage's runs: each variant at its own lowest mean val/loss
    best = {
        ("gelu", "layernorm"): "2e-3",
        ("gelu", "rmsnorm"): "4e-3",
        ("swiglu", "layernorm"): "1e-3",
        ("swiglu", "rmsnorm"): "2e-3",
    }
    cfg = {
        "protocol": {
            **p.protocol.__dict__,
            "tune": {"optim.lr": [1e-3, 2e-3, 4e-3]},
            "seeds": [1, 2, 3, 4, 5],
            "tune_seeds": [0],
            "stage": "tune",
        }
    }
    for key in ("equivalence_margin", "declared"):
        cfg["protocol"].pop(key)
    with pytest.raises(FileNotFoundError):  # nothing ran yet
        confirm_commands(p)
    for (ffn, norm), lr_best in best.items():
        for lr in ("1e-3", "2e-3", "4e-3"):
            if (ffn, norm, lr) == ("swiglu", "rmsnorm", "4e-3"):
                continue
            write_run(
                tmp_path,
                [
                    f"model/ffn={ffn}",
                    f"model/norm={norm}",
                    f"optim.lr={lr}",
                    "seed=0",
                    "protocol.stage=tune",
                ],
                config=cfg,
                metrics=completed(2.0 if lr == lr_best else 2.5, 2.0),
            )
    with pytest.raises(
        ConfigError,
        match=r"tune stage of \['model/ffn=swiglu', 'model/norm=rmsnorm'\] is not finished",
    ):
        confirm_commands(p)  # a candidate never ran: no choice is made without it
    write_run(
        tmp_path,
        [
            "model/ffn=swiglu",
            "model/norm=rmsnorm",
            "optim.lr=4e-3",
            "seed=0",
            "protocol.stage=tune",
        ],
        config=cfg,
        metrics=completed(2.5, 2.0),
    )
    confirm = confirm_commands(p)
    assert len(confirm) == 4
    for cmd, ((ffn, norm), lr) in zip(confirm, best.items()):
        assert {
            f"model/ffn={ffn}",
            f"model/norm={norm}",
            f"optim.lr={float(lr)}",
            "seed=1,2,3,4,5",
            "protocol.stage=confirm",
        } <= set(cmd)


def test_flops_matching_plans_steps_per_variant(tmp_path: Path) -> None:
    p = plan(
        [
            "experiment=study_quickstart",
            f"hydra.sweep.dir={tmp_path}",
            "protocol.match=flops",
            "trainer.max_steps=100",
            "model/ffn=gelu,relu",
            "~match_params.reference",
        ],
        work_dir=tmp_path,
    )
    assert [v["model/ffn"] for v in p.variants] == ["gelu", "relu"]
    assert p.steps == [
        100,
        100,
    ]  # GELU and ReLU FFNs have the same matmuls: the same FLOPs per step
    cmds = tune_commands(p)
    assert len(cmds) == 2 and all(
        "trainer.max_steps=100" in c and "protocol.stage=grid" in c for c in cmds
    )


@pytest.mark.slow
def test_quickstart_study_report_recomputes_from_runs_csv(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "MPLBACKEND": "Agg",
        "TRANSFORMER_LAB_CACHE": os.environ.get("TRANSFORMER_LAB_CACHE", str(tmp_path / "cache")),
    }
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "src.study",
            "experiment=study_quickstart",
            f"hydra.sweep.dir={sweep}",
            "trainer.max_steps=6",
            "trainer.val_check_interval=3",
            "scheduler.warmup_steps=2",
            "trainer.limit_val_batches=2",
            "trainer.limit_test_batches=2",
            # the declared 3 x 3 grid alone: runs.csv is checked against it (the grid extension
            # has its own tests, tests/studies/test_grid_extension.py)
            "protocol.max_grid_extensions=0",
            "--out",
            str(tmp_path / "report"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = tmp_path / "report"
    read = lambda name: list(csv.DictReader((out / name).open()))  # noqa: E731
    runs, table, comps = (
        read("runs.csv"),
        {x["variant"]: x for x in read("report.csv")},
        read("comparisons.csv"),
    )
    assert len(runs) == 18 and all(x["outcome"] == "ok" and x["stage"] == "grid" for x in runs)
    assert list(read("report.csv")[0]) == [
        "variant",
        "n_seeds",
        "mean",
        "std",
        "ci_low",
        "ci_high",
        "delta",
        "delta_ci_low",
        "delta_ci_high",
        "p",
        "p_holm",
        "verdict",
        "mde",
        "n_diverged",
        "diverged_share",
        "optim.lr",
    ]
    # selection: the lr with the lowest mean val/loss over the 3 seeds, from runs.csv alone
    verdict: dict[str, list[float]] = {}
    for variant in ("model/ffn=gelu", "model/ffn=swiglu"):
        mine = [x for x in runs if x["variant"] == variant]
        by_lr = {
            lr: [float(x["val/loss"]) for x in mine if x["optim.lr"] == lr]
            for lr in {x["optim.lr"] for x in mine}
        }
        assert sorted(by_lr) == ["0.001", "0.003", "0.01"] and all(
            len(v) == 3 for v in by_lr.values()
        )
        chosen = min(by_lr, key=lambda lr: np.mean(by_lr[lr]))
        assert table[variant]["optim.lr"] == chosen
        verdict[variant] = [
            float(x["test/loss"])
            for x in sorted(mine, key=lambda x: int(x["seed"]))
            if x["optim.lr"] == chosen
        ]  # by seed: both variants ran seeds 1-3 on the same data
        assert {x["role"] for x in mine if x["optim.lr"] == chosen} == {"selection+verdict"}
        # the summaries: mean, sample std, t-interval
        v, row = verdict[variant], table[variant]
        half = stats.t.ppf(0.975, 2) * np.std(v, ddof=1) / math.sqrt(3)
        assert int(row["n_seeds"]) == 3 and float(row["mean"]) == pytest.approx(np.mean(v))
        assert float(row["std"]) == pytest.approx(np.std(v, ddof=1))
        assert float(row["ci_low"]) == pytest.approx(np.mean(v) - half) and float(
            row["ci_high"]
        ) == pytest.approx(np.mean(v) + half)
    a, b = verdict["model/ffn=swiglu"], verdict["model/ffn=gelu"]
    row = table["model/ffn=swiglu"]
    # paired by seed (the same seeds, block and batch size: the same batches)
    w = stats.ttest_rel(a, b)
    ci = w.confidence_interval(0.95)
    assert float(row["delta"]) == pytest.approx(np.mean(a) - np.mean(b))
    assert (float(row["delta_ci_low"]), float(row["delta_ci_high"])) == (
        pytest.approx(ci.low),
        pytest.approx(ci.high),
    )
    assert float(row["p"]) == pytest.approx(w.pvalue)
    # the family: every comparison the report makes (here test/loss only), Holm over all of them
    tested = [c for c in comps if c["p"]]
    ps = sorted(float(c["p"]) for c in tested)
    k = ps.index(float(row["p"]))
    assert float(row["p_holm"]) == pytest.approx(
        min(1.0, max((len(ps) - j) * ps[j] for j in range(k + 1)))
    )
    # TOST against the stated margin (study_common: 0.02 nats), and the verdict it allows
    margin = 0.02
    p_tost = max(
        stats.ttest_rel(np.add(a, margin), b, alternative="greater").pvalue,
        stats.ttest_rel(np.subtract(a, margin), b, alternative="less").pvalue,
    )
    c = next(c for c in comps if c["variant"] == "model/ffn=swiglu" and c["metric"] == "test/loss")
    assert c["test"] == "paired" and c["pairs"] == "3"
    assert float(c["p_tost"]) == pytest.approx(p_tost) and float(c["margin"]) == margin
    expected = (
        ("better" if float(row["delta"]) < 0 else "worse")
        if float(row["p_holm"]) < 0.05
        else "equivalent"
        if float(c["p_tost_holm"]) < 0.05
        else "inconclusive"
    )
    assert row["verdict"] == expected and table["model/ffn=gelu"]["verdict"] == "baseline"
    # the minimum detectable effect at α/m and 80 % power, from the spread of the paired differences
    se, df = np.std(np.subtract(a, b), ddof=1) / math.sqrt(3), 2
    crit = stats.t.ppf(1 - 0.05 / len(tested) / 2, df)
    mde = float(row["mde"])
    assert stats.nct.sf(crit, df, mde / se) + stats.nct.cdf(-crit, df, mde / se) == pytest.approx(
        0.8, abs=1e-6
    )
    # compute: FLOPs per token x tokens seen, the same training tokens for both (tokens per step equal)
    for x in runs:
        assert float(x["train_flops"]) == pytest.approx(
            float(x["flops_per_token"]) * float(x["tokens_seen"])
        )
    md = (out / "report.md").read_text()
    assert (
        "reference: 4-gram (Kneser-Ney)" in md
        and (out / "tuning_optim_lr.png").stat().st_size > 1000
    )
    assert (
        len(read("references.csv")) == 4
        and (sweep / "study_commands.sh").read_text().count("src.train -m") == 1
    )


def _power(n: int, delta: float, se_of_n, df_of_n, alpha: float) -> float:  # noqa: ANN001
    se, df = se_of_n(n), df_of_n(n)
    crit = stats.t.ppf(1 - alpha / 2, df)
    return stats.nct.sf(crit, df, delta / se) + stats.nct.cdf(-crit, df, delta / se)


def test_plan_sizes_the_seeds_from_the_tune_runs_by_hand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--plan: from a grid tune stage (3 seeds per lr), the seeds per variant for protocol.target_mde under the
    paired and the unpaired design, each the smallest n whose noncentral-t power reaches 80 %."""
    from src.study import main, power_plan_of

    sweep = tmp_path / "sweep"
    offset = {1: 0.0, 2: 0.06, 3: -0.05}  # per-seed noise both variants share (the same batches)
    for ffn, shift, wiggle in (
        ("gelu", 0.0, (0.0, 0.0, 0.0)),
        ("swiglu", -0.02, (0.01, -0.012, 0.004)),
    ):
        for lr in ("0.001", "0.003", "0.01"):
            for s in (1, 2, 3):
                v = 2.0 + offset[s] + shift + wiggle[s - 1] + (0.0 if lr == "0.003" else 0.3)
                write_run(
                    sweep,
                    [f"model/ffn={ffn}", f"optim.lr={lr}", f"seed={s}", "protocol.stage=grid"],
                    metrics={**completed(v, v), "wall_time_s": 30.0},
                    budget={"flops_per_token": 1e6},
                    config={"protocol": {"design": "grid", "stage": "grid"}},
                )
    args = ["experiment=study_quickstart", f"hydra.sweep.dir={sweep}", "protocol.target_mde=0.02"]
    row = power_plan_of(plan(args)).rows[0]
    a = [2.0 + offset[s] - 0.02 + (0.01, -0.012, 0.004)[s - 1] for s in (1, 2, 3)]
    b = [2.0 + offset[s] for s in (1, 2, 3)]
    sa, sb, sd = np.std(a, ddof=1), np.std(b, ddof=1), np.std(np.subtract(a, b), ddof=1)
    assert (
        row.sd == (pytest.approx(sa), pytest.approx(sb))
        and row.sd_diff == pytest.approx(sd)
        and row.pairs == 3
    )

    def welch_df(n: int) -> float:
        va, vb = sa**2 / n, sb**2 / n
        return (va + vb) ** 2 / (va**2 / (n - 1) + vb**2 / (n - 1))

    unpaired = lambda n: _power(n, 0.02, lambda k: math.sqrt((sa**2 + sb**2) / k), welch_df, 0.05)  # noqa: E731
    paired = lambda n: _power(n, 0.02, lambda k: sd / math.sqrt(k), lambda k: k - 1, 0.05)  # noqa: E731
    assert unpaired(row.unpaired) >= 0.8 > unpaired(row.unpaired - 1)
    assert paired(row.paired) >= 0.8 and (row.paired == 2 or paired(row.paired - 1) < 0.8)
    assert row.paired < row.unpaired  # the shared seed noise cancels in the pairs
    main([*args, "--plan"])
    out = capsys.readouterr().out
    assert (
        "| model/ffn=swiglu | model/ffn=gelu | tune runs |" in out
        and f"{row.unpaired * 2} runs, " in out
    )
    # without runs: the pilot spread, unpaired only; without a target: a clear error
    empty = [
        "experiment=study_quickstart",
        f"hydra.sweep.dir={tmp_path / 'none'}",
        "protocol.target_mde=0.02",
        "protocol.pilot_sd=0.05",
    ]
    pilot = power_plan_of(plan(empty)).rows[0]
    assert (
        pilot.paired is None and pilot.unpaired == power_plan_of(plan(empty)).rows[0].unpaired > 2
    )
    with pytest.raises(ConfigError, match="protocol.target_mde"):
        power_plan_of(plan(["experiment=study_quickstart", f"hydra.sweep.dir={sweep}"]))


def test_auto_seeds_confirm_on_the_planned_number_and_the_report_says_so(tmp_path: Path) -> None:
    """The seeds plan is written by a confirm stage that runs, never by a dry run, and the report
    checks it against the runs it reads (issue 53: a dry run's plan made the report state seeds
    nothing ran on)."""
    from src.jsonfile import write_json
    from src.report import make_report
    from src.study import confirm_stage, main, power_plan_of

    sweep = tmp_path / "sweep"
    offset = {0: 0.0, 1: 0.06, 2: -0.05}
    proto = {
        "factors": ["model/ffn"],
        "tune": {"optim.lr": [1e-3, 3e-3, 1e-2]},
        "design": "two_stage",
        "tune_seeds": [0, 1, 2],
        "seeds": "auto",
        "target_mde": 0.02,
        "max_seeds": 6,
        "baseline": "model/ffn=gelu",
        "stage": "tune",
    }
    for ffn, shift, wiggle in (
        ("gelu", 0.0, (0.0, 0.0, 0.0)),
        ("swiglu", -0.02, (0.01, -0.012, 0.004)),
    ):
        for lr in ("0.001", "0.003", "0.01"):
            for s in (0, 1, 2):
                v = 2.0 + offset[s] + shift + wiggle[s] + (0.0 if lr == "0.003" else 0.3)
                write_run(
                    sweep,
                    [f"model/ffn={ffn}", f"optim.lr={lr}", f"seed={s}", "protocol.stage=tune"],
                    metrics=completed(v, v),
                    config={"protocol": proto},
                )
    args = [
        "experiment=study_quickstart",
        f"hydra.sweep.dir={sweep}",
        "protocol.design=two_stage",
        "protocol.tune_seeds=[0,1,2]",
        "protocol.seeds=auto",
        "protocol.target_mde=0.02",
        "protocol.max_seeds=6",
    ]
    p = plan(args)
    need = power_plan_of(p).rows[0].paired
    cmds, record = confirm_stage(p)
    assert confirm_commands(p) == cmds
    # past the tune seeds 0, 1, 2
    seeds = [str(s) for s in range(3, 3 + min(6, max(2, need)))]
    assert len(cmds) == 2 and all(f"seed={','.join(seeds)}" in c for c in cmds)
    assert record["seeds"] == seeds
    assert record["needed"] == [need] and record["capped"] == (need > 6)
    # a dry run shows the confirm stage and writes no plan: the report quotes only what ran
    main([*args, "--stage", "confirm", "--dry-run"])
    assert not (sweep / "seeds_plan.json").exists()
    # the plan as a confirm stage that ran writes it; its runs on only the first two seeds so far
    write_json(sweep / "seeds_plan.json", record)

    def confirm_run(ffn: str, seed: str) -> None:
        write_run(
            sweep,
            [f"model/ffn={ffn}", "optim.lr=0.003", f"seed={seed}", "protocol.stage=confirm"],
            metrics=completed(2.0 + 0.01 * int(seed), 2.0 + 0.01 * int(seed)),
            config={"protocol": {**proto, "stage": "confirm"}},
        )

    for ffn in ("gelu", "swiglu"):
        for seed in seeds[:2]:
            confirm_run(ffn, seed)
    md = make_report([sweep], tmp_path / "out").markdown.read_text()
    assert f"protocol.seeds: auto planned {len(seeds)} seeds ({', '.join(seeds)})" in md
    assert f"differ from that plan: their seeds are {seeds[0]}, {seeds[1]} " in md
    for ffn in ("gelu", "swiglu"):
        for seed in seeds[2:]:
            confirm_run(ffn, seed)
    md = make_report([sweep], tmp_path / "out2").markdown.read_text()
    assert "every variant's verdict runs are on exactly these seeds" in md
    with pytest.raises(ConfigError, match="protocol.seeds=auto needs protocol.design=two_stage"):
        plan(
            [
                "experiment=study_quickstart",
                "protocol.seeds=auto",
                "protocol.target_mde=0.02",
                "protocol.max_seeds=6",
            ]
        )


def test_a_stage_with_a_job_that_failed_otherwise_than_diverging_stops_the_study(
    tmp_path: Path,
) -> None:
    """A multirun that exits non-zero because a job diverged is a result; one whose job failed for another reason
    (or never wrote metrics.json, as a job refused a slot) stops src.study with the jobs named."""
    sweep = tmp_path / "sweep"
    write_run(
        sweep,
        ["seed=0", "optim.lr=0.1"],
        metrics={
            "status": "failed",
            "error": "NonFiniteLossError: non-finite training loss (NaN/inf) at step 54",
        },
    )
    write_run(sweep, ["seed=0", "optim.lr=0.01"], metrics=completed(1.5, 1.6))
    fail = [sys.executable, "-c", "raise SystemExit(1)"]
    run_commands([fail], sweep, dry_run=False)  # only a divergence: the study goes on
    assert (sweep / "study_commands.sh").read_text().count("raise SystemExit(1)") == 1
    write_run(sweep, ["seed=0", "optim.lr=0.001"], metrics=None)  # died before training
    write_run(
        sweep,
        ["seed=1", "optim.lr=0.01"],
        metrics={"status": "failed", "error": "ConfigError: all 2 job slots"},
    )
    with pytest.raises(
        ConfigError,
        match=r"2 job\(s\).*\n  seed=0,optim.lr=0.001: no metrics.json.*\n"
        r"  seed=1,optim.lr=0.01: ConfigError: all 2 job slots",
    ):
        run_commands([fail], sweep, dry_run=False)
    # every job ran fine: nothing is checked
    run_commands([[sys.executable, "-c", "pass"]], sweep, dry_run=False)


def test_flags_and_overrides_come_in_any_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--dry-run` between overrides (or after them) is the same command: argparse reads both."""
    from src.study import main

    sweep = f"hydra.sweep.dir={tmp_path / 'sweep'}"
    main(["experiment=study_quickstart", "--dry-run", sweep, "protocol.seeds=[1,2]"])
    between = capsys.readouterr().out
    main(["experiment=study_quickstart", sweep, "protocol.seeds=[1,2]", "--dry-run"])
    assert between == capsys.readouterr().out and "seed=1,2" in between


def test_a_plan_row_says_why_it_has_no_seed_count() -> None:
    """ "no spread" only where no spread was measured; a spread too small for the target is "over
    1,000 seeds" (issue 53: the report gave "no spread" where 1,000 seeds were not enough)."""
    from src.reporting.planning import PlanRow

    row = lambda sd, diff, paired, unpaired: PlanRow("a", "b", sd, diff, 3, unpaired, paired, "")  # noqa: E731
    assert row((0.1, 0.1), 0.05, 4, 9).needed() == (4, "")
    assert row((0.1, 0.1), None, None, 9).needed() == (9, "")
    assert row((None, None), None, None, None).needed() == (None, "no spread")
    assert row((0.5, 0.5), 0.5, None, None).needed() == (None, "over 1,000 seeds")


@pytest.mark.slow
def test_a_real_confirm_stage_writes_the_seeds_plan_its_runs_follow(tmp_path: Path) -> None:
    """A real dry run, then a real confirm stage (4 short trainings): the plan is written by the
    confirm that ran, a later dry run with another cap leaves it alone, and the report finds the
    runs on exactly the planned seeds."""
    from src.jsonfile import read_json
    from src.report import make_report
    from src.study import main

    sweep = tmp_path / "sweep"
    # the protocol the real confirm runs record (the report refuses runs of different protocols)
    proto = {
        "factors": ["model/ffn"],
        "tune": {"optim.lr": [1e-3, 3e-3, 1e-2]},
        "design": "two_stage",
        "tune_seeds": [0, 1, 2],
        "seeds": "auto",
        "baseline": "model/ffn=gelu",
        "target_mde": 0.001,
        "max_seeds": 2,
    }
    short = [
        "trainer.max_steps=4",
        "trainer.val_check_interval=2",
        "trainer.limit_val_batches=1",
        "trainer.limit_test_batches=1",
        "scheduler.warmup_steps=1",
    ]
    for ffn, shift in (("gelu", 0.0), ("swiglu", -0.02)):
        for lr in ("0.001", "0.003", "0.01"):
            for s, wiggle in ((0, 0.0), (1, 0.05), (2, -0.04)):
                v = 2.0 + shift + wiggle + (0.0 if lr == "0.003" else 0.3)
                write_run(
                    sweep,
                    [
                        "experiment=study_quickstart",
                        *short,
                        f"model/ffn={ffn}",
                        f"optim.lr={lr}",
                        f"seed={s}",
                        "protocol.stage=tune",
                    ],
                    metrics=completed(v, v),
                    config={
                        "protocol": {**proto, "stage": "tune"},
                        "report": {"equivalence_margin": 0.02},
                    },
                )
    args = [
        "experiment=study_quickstart",
        f"hydra.sweep.dir={sweep}",
        "protocol.design=two_stage",
        "protocol.tune_seeds=[0,1,2]",
        "protocol.seeds=auto",
        "protocol.target_mde=0.001",
        *short,
    ]
    main([*args, "protocol.max_seeds=3", "--stage", "confirm", "--dry-run"])
    assert not (sweep / "seeds_plan.json").exists()
    main([*args, "protocol.max_seeds=2", "--stage", "confirm"])
    record = read_json(sweep / "seeds_plan.json")
    assert record["seeds"] == ["3", "4"]
    main([*args, "protocol.max_seeds=3", "--stage", "confirm", "--dry-run"])
    assert read_json(sweep / "seeds_plan.json") == record
    md = make_report([sweep], tmp_path / "out").markdown.read_text()
    assert "protocol.seeds: auto planned 2 seeds (3, 4)" in md
    assert "every variant's verdict runs are on exactly these seeds" in md
