"""Optimisers are a study factor like any other: ``optim=adamw,muon`` sweeps, and the protocol tunes
each optimiser's own learning rate (src/studies/tuning.py, unchanged)."""

from __future__ import annotations

from pathlib import Path

from src.studies.stages import tune_commands
from src.study import confirm_commands, plan
from tests.reporting.fake_runs import completed, write_run

STUDY = """# @package _global_
defaults:
  - study_quickstart
hydra:
  sweep:
    dir: {sweep}
  sweeper:
    params:
      model/ffn: gelu     # the quickstart's factor, held at one value
      optim: adamw,muon
protocol:
  factors: [optim]
  tune:
    optim.lr: [3.0e-4, 3.0e-3, 3.0e-2]
  design: two_stage
  tune_seeds: [0]
  seeds: [1, 2]
  baseline: optim=adamw
"""


def test_each_optimizer_is_tuned_to_its_own_lr(tmp_path: Path) -> None:
    conf, sweep = tmp_path / "conf", tmp_path / "sweep"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "study_optim_factor.yaml").write_text(STUDY.format(sweep=sweep))
    p = plan(["experiment=study_optim_factor", f"hydra.searchpath=[file://{conf}]"])
    (tune,) = tune_commands(p)
    assert {
        "optim=adamw,muon",
        "optim.lr=0.0003,0.003,0.03",
        "seed=0",
        "protocol.stage=tune",
    } <= set(tune)
    best = {"adamw": "0.003", "muon": "0.03"}
    protocol = {
        **{
            k: v
            for k, v in p.protocol.__dict__.items()
            if k not in ("equivalence_margin", "declared")
        },
        "tune": {"optim.lr": [3e-4, 3e-3, 3e-2]},
        "seeds": [1, 2],
        "tune_seeds": [0],
        "stage": "tune",
    }
    for name, chosen in best.items():
        for lr in ("0.0003", "0.003", "0.03"):
            # optim.lr first: fake_runs composes the overrides in order, and the group override replaces its node
            overrides = [
                "model/ffn=gelu",
                f"optim.lr={lr}",
                f"optim={name}",
                "seed=0",
                "protocol.stage=tune",
            ]
            write_run(
                sweep,
                overrides,
                name=f"model.ffn=gelu,optim={name},optim.lr={lr},seed=0,protocol.stage=tune",
                config={"optim": {"name": name, "lr": float(lr)}, "protocol": protocol},
                metrics=completed(2.0 if lr == chosen else 2.6, 2.0),
            )
    confirm = confirm_commands(p)
    assert len(confirm) == 2
    for cmd, (name, chosen) in zip(confirm, best.items()):
        assert {
            f"optim={name}",
            f"optim.lr={float(chosen)}",
            "seed=1,2",
            "protocol.stage=confirm",
        } <= set(cmd), cmd
