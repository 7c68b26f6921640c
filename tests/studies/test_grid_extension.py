"""Grid extension (docs/studies.md, "Grid extension"): a chosen value at an edge of its grid gets a
candidate one grid step past it before the confirm stage, which refuses to start at an edge unless
``protocol.allow_edge``; the report lists every extension.

The studies here run ``python -m src.study``'s own stages with a fake trainer in place of
``src.train``: each job becomes a run directory (tests/reporting/fake_runs.py) whose validation
loss is a function of its learning rate, so a study takes seconds."""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from src.errors import ConfigError
from src.report import make_report
from src.studies.protocol import canonical
from src.studies.stages import edge_refusal, extension_commands
from src.studies.tuning import extended_value
from src.study import confirm_commands, main, plan
from tests.reporting.fake_runs import completed, write_run

GRID = [1e-3, 3e-3, 1e-2]  # study_quickstart's
# the learning rate at which each variant's validation loss is lowest: SwiGLU's lies below the grid
BEST = {"gelu": 3e-3, "swiglu": 2e-4}


def grid(*values: float) -> list[str]:
    return sorted((canonical(v) for v in values), key=float)


@pytest.mark.parametrize(
    "values, chosen, added",
    [
        ((1e-3, 2e-3, 4e-3), 1e-3, "0.0005"),  # ratio 2, below
        ((1e-3, 2e-3, 4e-3), 4e-3, "0.008"),  # ratio 2, above
        ((1e-3, 3e-3, 1e-2), 1e-3, "0.00033"),  # ratio 3 at that edge, two significant digits
        ((1e-3, 3e-3, 1e-2), 1e-2, "0.033"),  # ratio 10/3 at that edge
        ((3.3e-4, 1e-3, 3e-3, 1e-2), 3.3e-4, "0.00011"),  # a second extension: the new edge's ratio
        ((16, 32, 64), 16, "8"),  # whole numbers stay whole
        ((-4, -2, -1), -4, "-8"),  # a negative geometric grid
    ],
)
def test_a_geometric_grid_extends_by_its_ratio(
    values: Sequence[float], chosen: float, added: str
) -> None:
    assert extended_value(grid(*values), canonical(chosen)) == added


@pytest.mark.parametrize(
    "values, chosen, added",
    [
        ((0.1, 0.2, 0.3), 0.3, "0.4"),  # exact in decimal: no 0.4000000000000001
        ((0.1, 0.2, 0.3), 0.1, "0"),
        ((0, 100, 200), 200, "300"),
        ((1, 2, 3), 1, "0"),
        ((-1, 0, 1), -1, "-2"),  # a grid across zero steps by its difference
    ],
)
def test_an_arithmetic_grid_extends_by_its_difference(
    values: Sequence[float], chosen: float, added: str
) -> None:
    assert extended_value(grid(*values), canonical(chosen)) == added


@pytest.mark.parametrize(
    "values, chosen",
    [
        ((0, 100, 200), 0),  # warmup steps: a non-negative grid stays non-negative
        ((1, 2, 4), 1),  # a whole-number ratio step below 1 rounds to 0
        ((1e-3,), 1e-3),  # one candidate: no step to take
        ((1e-3, 2e-3, 4e-3), 2e-3),  # not at an edge
    ],
)
def test_grids_that_cannot_be_extended(values: Sequence[float], chosen: float) -> None:
    assert extended_value(grid(*values), canonical(chosen)) is None
    assert extended_value(["adamw", "muon"], "adamw") is None


def val_loss(ffn: str, lr: str, seed: str) -> float:
    """A bowl in log(lr) around the variant's best, with a little seed noise."""
    return 2.0 + 0.1 * (math.log10(float(lr)) - math.log10(BEST[ffn])) ** 2 + 0.001 * int(seed)


def fake_trainer(
    sweep: Path, protocol: dict, ran: list[list[str]]
) -> Callable[[Sequence[list[str]], Path, bool], None]:
    """``src.study.run_commands`` with each job of each multirun written as a finished run (a job
    whose folder exists is skipped, as the sweep's resume does)."""

    def run(commands: Sequence[list[str]], sweep_dir: Path, dry_run: bool) -> None:
        for cmd in commands:
            ran.append(cmd)
            if dry_run:
                continue
            texts = [o for o in cmd[4:] if not o.startswith("hydra.")]
            parsed = OverridesParser.create().parse_overrides(texts)
            axes = [
                [f"{o.key_or_group}={v}" for v in o.sweep_string_iterator()]
                if o.is_sweep_override()
                else [text]
                for text, o in zip(texts, parsed)
            ]
            for job in itertools.product(*axes):
                d = dict(o.split("=", 1) for o in job)
                name = (
                    ",".join(f"{k}={d[k]}" for k in ("model/ffn", "optim.lr", "seed")).replace(
                        "/", "."
                    )
                    + f",{d['protocol.stage']}"
                )
                if (sweep / name).exists():
                    continue
                v = val_loss(d["model/ffn"], d["optim.lr"], d["seed"])
                write_run(
                    sweep,
                    list(job),
                    name=name,
                    config={"protocol": {**protocol, "stage": d["protocol.stage"]}},
                    metrics=completed(v, v + 0.01),
                )

    return run


def study(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    design: str = "two_stage",
    **protocol: object,
) -> tuple[list[str], dict, list[list[str]]]:
    """The quickstart study's overrides (under ``design``, with ``protocol``'s keys set), its
    protocol node as the runs save it, and the list of commands the fake trainer ran."""
    sweep = tmp_path / "sweep"
    node = {
        "factors": ["model/ffn"],
        "tune": {"optim.lr": GRID},
        "design": design,
        "tune_seeds": [0],
        "seeds": [1, 2],
        "baseline": "model/ffn=gelu",
        "max_grid_extensions": 2,
        "allow_edge": False,
        **protocol,
    }
    args = [
        "experiment=study_quickstart",
        f"hydra.sweep.dir={sweep}",
        f"protocol.design={design}",
        "protocol.tune_seeds=[0]",
        "protocol.seeds=[1,2]",
        f"protocol.max_grid_extensions={node['max_grid_extensions']}",
        f"protocol.allow_edge={str(node['allow_edge']).lower()}",
    ]
    ran: list[list[str]] = []
    monkeypatch.setattr("src.study.run_commands", fake_trainer(sweep, node, ran))
    return args, node, ran


def lr_of(cmd: list[str]) -> str:
    return next(o.split("=", 1)[1] for o in cmd if o.startswith("optim.lr="))


def test_an_edge_is_extended_before_the_confirm_stage_and_the_report_lists_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args, _, ran = study(tmp_path, monkeypatch)
    main([*args, "--out", str(tmp_path / "report")])
    _, ext1, ext2, *confirm = ran
    # SwiGLU chose 1e-3, the lower edge: 3.3e-4 on the tune seed, then (still the edge) 1.1e-4
    for cmd, lr in ((ext1, "0.00033"), (ext2, "0.00011")):
        assert {"model/ffn=swiglu", f"optim.lr={lr}", "seed=0", "protocol.stage=tune"} <= set(cmd)
        assert "model/ffn=gelu" not in cmd
    # 3.3e-4 is now inside the grid: each variant confirms its own choice
    assert {lr_of(c) for c in confirm} == {"0.003", "0.00033"}
    assert all("protocol.stage=confirm" in c and "seed=1,2" in c for c in confirm)
    md = (tmp_path / "report" / "report.md").read_text()
    section = md.split("## Grid extensions")[1].split("\n## ")[0]
    assert (
        "| model/ffn=swiglu | `optim.lr` | 0.001, 0.003, 0.01 | 0.00033, 0.00011 | yes" in section
    )
    assert "gelu" not in section and "flagged **edge**" not in section
    # the study resumes: a second run finds every extension done and adds none
    ran.clear()
    main([*args, "--stage", "tune", "--dry-run"])
    assert [lr_of(c) for c in ran] == ["0.001,0.003,0.01"]
    assert "# grid extensions: none to make" in capsys.readouterr().out


def test_the_confirm_stage_refuses_an_edge_left_after_the_extensions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args, _, ran = study(tmp_path, monkeypatch, max_grid_extensions=1)
    # only the study's own handler: none an earlier test left on a stream pytest has closed
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    with pytest.raises(SystemExit) as stop:
        main(args)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    # the progress lines (the extension made) come first; the refusal is one line, no traceback
    line = err.strip().splitlines()[-1]
    assert "Traceback" not in err and line.startswith("python -m src.study: ")
    # the variant, the key, the value and the fix
    for text in ("model/ffn=swiglu", "optim.lr=0.00033", "max_grid_extensions", "allow_edge=true"):
        assert text in line
    assert len(ran) == 2 and not any("protocol.stage=confirm" in c for c in ran)


def test_max_grid_extensions_0_never_extends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args, _, ran = study(tmp_path, monkeypatch, max_grid_extensions=0)
    with pytest.raises(SystemExit):
        main(args)
    assert len(ran) == 1  # the tune stage alone
    p = plan(args)
    assert extension_commands(p) == []
    refusal = edge_refusal(p)
    assert refusal and "optim.lr=0.001" in refusal and "max_grid_extensions (now 0)" in refusal
    assert "optim.lr=0.001" in capsys.readouterr().err


def test_allow_edge_confirms_at_the_edge_and_flags_the_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args, _, ran = study(tmp_path, monkeypatch, max_grid_extensions=0, allow_edge=True)
    main([*args, "--out", str(tmp_path / "report")])
    confirm = [c for c in ran if "protocol.stage=confirm" in c]
    assert {lr_of(c) for c in confirm} == {"0.003", "0.001"}
    files = make_report([tmp_path / "sweep"], tmp_path / "again")
    rows = {r.label: r.tuned for r in files.report.rows}
    assert rows["model/ffn=swiglu"].edge_verdicts and not rows["model/ffn=gelu"].edge_verdicts
    md = files.markdown.read_text()
    section = md.split("## Grid extensions")[1].split("\n## ")[0]
    assert "None made" in section
    assert "flagged **edge**: model/ffn=swiglu (optim.lr=0.001)" in section
    assert "allow_edge=true" in section and "⚠ edge" in md


def test_an_interrupted_extension_runs_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args, node, _ = study(tmp_path, monkeypatch)
    sweep = tmp_path / "sweep"
    for ffn, lr in itertools.product(BEST, GRID):
        v = val_loss(ffn, str(lr), "0")
        write_run(
            sweep,
            [f"model/ffn={ffn}", f"optim.lr={lr}", "seed=0", "protocol.stage=tune"],
            config={"protocol": {**node, "stage": "tune"}},
            metrics=completed(v, v),
        )
    p = plan(args)
    (cmd,) = extension_commands(p)
    assert lr_of(cmd) == "0.00033"
    write_run(  # the job died before it wrote metrics.json
        sweep,
        ["model/ffn=swiglu", "optim.lr=0.00033", "seed=0", "protocol.stage=tune"],
        config={"protocol": {**node, "stage": "tune"}},
        metrics=None,
    )
    (again,) = extension_commands(p)
    assert again == cmd
    with pytest.raises(ConfigError, match="tune stage of .*swiglu.* is not finished"):
        confirm_commands(p)  # and the confirm stage waits for it


def test_the_grid_design_extends_on_every_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """study_quickstart's own design: the added candidate runs on every seed, labelled grid, and
    its runs are the verdict runs when it is chosen."""
    args, _, ran = study(tmp_path, monkeypatch, design="grid")
    main([*args, "--out", str(tmp_path / "report")])
    _, *extensions = ran
    assert [lr_of(c) for c in extensions] == ["0.00033", "0.00011"]
    assert all(
        {"seed=1,2", "protocol.stage=grid", "model/ffn=swiglu"} <= set(c) for c in extensions
    )
    md = (tmp_path / "report" / "report.md").read_text()
    assert "| model/ffn=swiglu | `optim.lr` | 0.001, 0.003, 0.01 | 0.00033, 0.00011 | yes" in md
