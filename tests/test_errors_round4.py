"""Errors that arrived wrapped by Hydra or with the wrong advice: each is one line of this project,
naming the key, the value and the fix (``~key`` or ``key=null`` where that is the fix), with no
traceback, and ``metrics.json`` records its own type.

Fast: the messages are checked in-process where they are raised; one short subprocess checks the
whole chain (a callback's error unwrapped at the command line and in metrics.json)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hydra.core.global_hydra import GlobalHydra

import src.training  # noqa: F401  (registers the resolvers conf/ uses, as src.train does)
from src.errors import CheckpointError, ConfigError, DataError

CONF = Path(__file__).resolve().parents[1] / "conf"

PROBES = "src.callbacks.probes.Probes"


@pytest.fixture
def no_hydra() -> Iterator[None]:
    """No Hydra app initialised around a test (the preflight checks compose only then, as before
    ``main``; ``compose`` initialises its own)."""
    GlobalHydra.instance().clear()
    yield
    GlobalHydra.instance().clear()


def compose(*overrides: str) -> Any:
    """conf/train.yaml composed with ``overrides``, as ``python -m src.train`` would see it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return hydra_compose(
            "train", overrides=["paths.output_dir=/tmp/unused", "paths.root_dir=/tmp", *overrides]
        )


def one_line(message: str) -> str:
    assert "\n" not in message.strip(), message
    assert "Traceback" not in message and "Error in call to target" not in message, message
    return message


# ---------------------------------------------------------------- callbacks.probes.*: unwrapped

PROBE_CASES = [
    ("every_n_steps", -1, "callbacks.probes.every_n_steps=50"),
    ("every_n_steps", 2.5, "callbacks.probes.every_n_steps=50"),
    ("every_n_steps", "abc", "callbacks.probes.every_n_steps=50"),
    ("every_n_steps", True, "callbacks.probes.every_n_steps=50"),
    ("induction_threshold", 1.5, "callbacks.probes.induction_threshold=0.4"),
    ("batch_size", 0, "callbacks.probes.batch_size=16"),
    ("icl_early", -1, "[1, 63]"),
    ("icl_early", 2.5, "[1, 63]"),
    ("icl_late", 100000, "[2, 63]"),
    ("seed", -5, "callbacks.probes.seed="),
]


@pytest.mark.parametrize(
    ("key", "value", "fix"), PROBE_CASES, ids=[f"{k}={v}" for k, v, _ in PROBE_CASES]
)
def test_a_probe_key_error_is_the_projects_own_not_hydras(key: str, value: Any, fix: str) -> None:
    from src.training.setup import instantiate_node

    node = {"_target_": PROBES, key: value}
    with pytest.raises(ConfigError) as caught:  # not hydra's InstantiationException around it
        instantiate_node(node)
    message = one_line(str(caught.value))
    assert f"callbacks.probes.{key}={value!r}" in message or f"callbacks.probes.{key}={value}" in (
        message
    )
    assert fix in message
    assert "set both" not in message  # the range, not the partner, for a wrong position


def test_an_error_that_is_not_ours_stays_hydras() -> None:
    from hydra.errors import InstantiationException

    from src.training.setup import instantiate_node

    with pytest.raises(InstantiationException):
        instantiate_node({"_target_": "builtins.int", "no_such": 1})  # a TypeError
    with pytest.raises(InstantiationException):
        instantiate_node({"_target_": "no.such.Module"})


def test_probe_error_is_one_line_and_recorded_as_config_error(
    run_entry_point: Any, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    proc = run_entry_point(
        "src.train",
        [
            "experiment=synthetic_quickstart",
            "trainer.max_steps=1",
            "callbacks.probes.every_n_steps=-1",
            f"hydra.run.dir={run}",
        ],
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Error in call to target" not in proc.stderr
    assert "ConfigError: callbacks.probes.every_n_steps=-1" in proc.stderr
    if (run / "metrics.json").exists():  # a check in validation writes none: nothing was built
        error = json.loads((run / "metrics.json").read_text())["error"]
        assert error.startswith("ConfigError: callbacks.probes.every_n_steps=-1"), error


# ---------------------------------------------------------------- the command line (preflight)


def _preflight_message(argv: list[str]) -> str:
    from src.config.typos import MisspeltOverride, check_command_line

    with pytest.raises(MisspeltOverride) as caught:
        check_command_line("train", argv)
    return one_line(str(caught.value))


def test_schedulefree_advice_followed_in_a_sweep_names_the_swept_key(no_hydra: None) -> None:
    # the advice (scheduler=none) followed in a sweep of an experiment that sweeps
    # scheduler.warmup_steps: one line naming the swept key, not Hydra's "not in struct" per job
    message = _preflight_message(
        ["-m", "experiment=study_norm", "optim=schedulefree", "scheduler=none"]
    )
    assert "scheduler.warmup_steps" in message and "experiment=study_norm" in message
    assert "scheduler=none" in message and "without -m" in message


def test_schedulefree_advice_followed_in_a_single_run_is_accepted(no_hydra: None) -> None:
    from src.config.validate import validate_run_config

    with pytest.raises(ConfigError) as caught:
        validate_run_config(compose("experiment=synthetic_quickstart", "optim=schedulefree"))
    assert "scheduler=none" in one_line(str(caught.value))
    # what the experiment set for cosine (scheduler.warmup_steps) is left out, not refused
    cfg = compose("experiment=synthetic_quickstart", "optim=schedulefree", "scheduler=none")
    validate_run_config(cfg, inherited=["scheduler.warmup_steps"])


def test_decay_from_on_a_schedule_without_it_names_the_schedule_that_has_it(
    no_hydra: None,
) -> None:
    message = _preflight_message(["scheduler=cosine", "scheduler.decay_from=/tmp/stable.ckpt"])
    assert message.startswith("ConfigError: scheduler.decay_from is not a key of scheduler=cosine")
    assert "scheduler=wsd" in message and "+scheduler" not in message


# ---------------------------------------------------------------- scheduler.decay_from=<text file>


def test_decay_from_a_text_file_says_it_is_not_a_checkpoint(tmp_path: Path) -> None:
    from src.optim import schedule_config

    notes = tmp_path / "notes.txt"
    notes.write_text("some notes\nabout the run\n")
    with pytest.raises(ConfigError) as caught:
        schedule_config({"name": "wsd", "decay_from": str(notes)})
    message = one_line(str(caught.value))
    assert f"scheduler.decay_from={notes} is not a checkpoint" in message
    assert "ckpt_path" not in message and "file an issue" not in message
    assert "scheduler.decay_from=null" in message


def test_a_text_file_loaded_as_a_checkpoint_is_a_checkpoint_error(tmp_path: Path) -> None:
    from src.checkpoints.io import safe_torch_load

    for text in ("hello\n", "some notes\nabout things\n"):
        path = tmp_path / "x.txt"
        path.write_text(text)
        with pytest.raises(CheckpointError) as caught:  # not the unpickler's KeyError/IndexError
            safe_torch_load(path)
        assert "not a torch.save file" in one_line(str(caught.value))


# ---------------------------------------------------------------- --plan: an unreachable target


def test_plan_gives_the_reason_for_every_dash() -> None:
    from src.reporting.planning import PlanRow, PowerPlan

    rows = [PlanRow("b", "a", (0.1, 0.1), None, 0, None, None, "protocol.pilot_sd")]
    text = PowerPlan(rows, 1e-9, 0.05, None, None, 2).render()
    assert "| – (over 1,000 seeds) | – (no paired spread) |" in text
    assert "protocol.target_mde=1e-09 is out of reach" in text
    assert "Raise protocol.target_mde" in text


# ---------------------------------------------------------------- encoder-decoder block size


def test_an_encoder_decoder_block_size_is_checked_per_side(no_hydra: None) -> None:
    from src.config.validate import validate_run_config

    base = ("experiment=synthetic_quickstart", "model.family=encoder_decoder")
    with pytest.raises(DataError) as caught:
        validate_run_config(compose(*base, "model.max_seq_len=16"))
    message = one_line(str(caught.value))
    assert "block_size=16" in message and "at least 17" in message, message
    assert "reads as 32" not in message
    validate_run_config(compose(*base, "model.max_seq_len=17"))  # 17 prompt, 16 answer: fits
    with pytest.raises(DataError) as caught:  # a decoder-only model reads both as one sequence
        validate_run_config(compose("experiment=synthetic_quickstart", "model.max_seq_len=20"))
    assert "reads as 32" in str(caught.value) and "at least 32" in str(caught.value)
