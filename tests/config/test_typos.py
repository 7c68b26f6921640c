"""A misspelt key or group option on the command line gets one message from this project with the
closest accepted name, never Hydra's "+key" advice (issue 26, item 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from src.config.typos import check_command_line, command_line_overrides, composable, misspelling

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("config", "overrides", "expected"),
    [
        (
            "train",
            ["model.norm_placment=post"],
            "model.norm_placment is not a key of model (did you mean model.norm_placement?)",
        ),
        (
            "train",
            ["model/position=rope", "model.position.thetaa=1e4"],
            "(did you mean model.position.theta?)",
        ),
        ("train", ["optim.lrr=0.1"], "(did you mean optim.lr?)"),
        (
            "train",
            ["experiment=quickstrat"],
            "experiment=quickstrat is not an option of experiment (did you mean quickstart",
        ),
        ("train", ["model/position=learnd"], "(did you mean learned?)"),
        ("train", ["model/position=rotary"], "(did you mean rope?)"),
        ("train", ["optim=adam"], "(did you mean adamw?"),
        (
            "train",
            ["callbacks.sample_txt=null", "experiment=quickstart"],
            "(did you mean callbacks.sample_text?)",
        ),
        ("train", ["logger.csv.nmae=x", "logger=csv"], "(did you mean logger.csv.name?)"),
        (
            "eval",
            ["benchmarks=perplexity", "benchmarks.perplexity.pth=x"],
            "(did you mean benchmarks.perplexity.path?)",
        ),
        ("generate", ["max_new_tokns=3"], "(did you mean max_new_tokens?)"),
    ],
)
def test_each_kind_of_misspelling_names_the_closest(
    config: str, overrides: list[str], expected: str
) -> None:
    message = misspelling(config, composable(overrides) or [])
    assert message is not None and expected in message
    assert "+" not in message  # no "+key" advice: the key exists under another spelling


def test_no_close_name_or_a_valid_line_is_left_to_hydra() -> None:
    assert misspelling("train", ["model.norm_placement=post", "experiment=quickstart"]) is None
    # nothing close: Hydra's advice (+key) stands
    assert misspelling("train", ["model.zzzzqqq=1"]) is None
    assert misspelling("train", ["+model.new_key=1"]) is None  # adding a key is Hydra's business


def test_sweeps_check_every_value_and_flags_are_skipped() -> None:
    with pytest.raises(SystemExit, match=r"model/position=rpoe .*did you mean rope"):
        check_command_line("train", ["-m", "model/position=learned,rpoe", "seed=1,2"])
    assert composable(["seed=1,2", "hydra.sweep.dir=x", "model/position=rope,alibi"]) == [
        "seed=1",
        "model/position=rope",
    ]
    # another primary config: not ours to check
    assert command_line_overrides(["-m", "a=1", "--config-name", "x"]) is None
    assert command_line_overrides(["-m", "a=1", "--info", "config"]) == ["a=1"]
    # Optuna's interval sweep does not enumerate: nothing to compose, and no error of ours
    check_command_line(
        "train", ["-m", "optim.lr=tag(log,interval(1e-4,1e-2))", "hydra/sweeper=optuna"]
    )


def test_the_command_line_prints_one_line(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "src.train", "model.norm_placment=post"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"},
    )
    assert r.returncode == 1
    assert r.stderr.strip() == (
        "ConfigError: model.norm_placment is not a key of model (did you mean "
        "model.norm_placement?); fix the spelling"
    )
    assert not (tmp_path / "outputs").exists()  # nothing ran


def test_a_renamed_key_names_its_new_name() -> None:
    from src.config.typos import renamed_key

    assert renamed_key("eval", ["tasks=[lambada]"]) == (
        "ConfigError: tasks= is benchmarks= now; write benchmarks=[lambada]"
    )
    message = renamed_key("eval", ["tasks.lambada.path=x"])
    assert message is not None and "write benchmarks.lambada.path=x" in message
    assert renamed_key("train", ["tasks=[lambada]"]) is None  # only where it was renamed
    assert renamed_key("eval", ["benchmarks=[lambada]"]) is None
