"""scheduler=wsd and scheduler=inverse_sqrt: hand-computed learning rates, their errors, and a
schedule that a checkpoint cannot overwrite; schedule-free refuses a schedule that moves the lr."""

from __future__ import annotations

import math

import pytest
import torch

from src.errors import ConfigError
from src.optim import check_pair, optimizer_config, schedule_config

WSD = {
    "name": "wsd",
    "warmup_steps": 10,
    "decay_fraction": 0.2,
    "decay_shape": "1-sqrt",
    "min_lr": 0.0,
    "decay_from": None,
}


def lrs(node: dict, lr: float, max_steps: int, steps: list[int]) -> dict[int, float]:
    """The optimiser's lr before optimiser step s (0-based), for each s in ``steps``."""
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=lr)
    sched = schedule_config(node).build(opt, lr, max_steps)
    out = {}
    for s in range(max(steps) + 1):
        if s in steps:
            out[s] = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
    return out


# T = 100, W = 10, decay 20 % -> S = 80; u = (s - 80) / 20
@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ("linear", {85: 1 - 5 / 20, 90: 0.5, 99: 1 / 20}),
        (
            "cosine",
            {
                85: 0.5 * (1 + math.cos(math.pi * 0.25)),
                90: 0.5,
                99: 0.5 * (1 + math.cos(math.pi * 19 / 20)),
            },
        ),
        ("1-sqrt", {85: 1 - math.sqrt(0.25), 90: 1 - math.sqrt(0.5), 99: 1 - math.sqrt(19 / 20)}),
    ],
)
def test_wsd_equals_hand_computed_values(shape: str, expected: dict[int, float]) -> None:
    lr = 2e-3
    got = lrs(
        {**WSD, "decay_shape": shape}, lr, 100, [0, 4, 9, 10, 50, 79, 80, 85, 90, 99, 100, 120]
    )
    hand = {
        0: 1 / 11,
        4: 5 / 11,
        9: 10 / 11,
        10: 1.0,
        50: 1.0,
        79: 1.0,
        80: 1.0,
        **expected,
        100: 0.0,
        120: 0.0,
    }
    for s, mult in hand.items():
        assert got[s] == pytest.approx(lr * mult, rel=1e-12, abs=1e-15), (shape, s)


def test_wsd_min_lr_and_rounding() -> None:
    # T = 50, decay 0.25 -> round(12.5) = 12 steps, S = 38; min_lr 1e-4 of lr 1e-3 -> m = 0.1
    got = lrs(
        {**WSD, "warmup_steps": 0, "decay_fraction": 0.25, "decay_shape": "linear", "min_lr": 1e-4},
        1e-3,
        50,
        [37, 38, 44, 60],
    )
    assert got[37] == pytest.approx(1e-3) and got[38] == pytest.approx(1e-3)
    assert got[44] == pytest.approx(1e-3 * (0.1 + 0.9 * (1 - 6 / 12))) and got[60] == pytest.approx(
        1e-4
    )


def test_inverse_sqrt_equals_hand_computed_values() -> None:
    got = lrs({"name": "inverse_sqrt", "warmup_steps": 4}, 1.0, 0, [0, 3, 4, 15, 99])
    assert got == pytest.approx(
        {0: 1 / 5, 3: 4 / 5, 4: math.sqrt(4 / 5), 15: 0.5, 99: math.sqrt(4 / 100)}
    )
    assert lrs({"name": "inverse_sqrt", "warmup_steps": 0}, 1.0, 0, [0, 3]) == pytest.approx(
        {0: 1.0, 3: 0.5}
    )


@pytest.mark.parametrize("fraction", [0, 0.0, 1, 1.0, -0.2, 1.5, "half", float("nan")])
def test_decay_fraction_outside_the_open_unit_interval_is_refused(fraction: object) -> None:
    with pytest.raises(ConfigError) as e:
        schedule_config({**WSD, "decay_fraction": fraction})
    assert f"scheduler.decay_fraction={fraction!r}" in str(
        e.value
    ) and "strictly between 0 and 1" in str(e.value)


def test_wsd_run_rules() -> None:
    adamw = optimizer_config({"name": "adamw", "lr": 1e-3})
    for node, max_steps, parts in (
        (WSD, None, ("trainer.max_steps=None", "set trainer.max_steps")),
        (
            {**WSD, "warmup_steps": 90},
            100,
            ("scheduler.warmup_steps=90", "scheduler.decay_fraction=0.2", "step 80"),
        ),
        ({**WSD, "min_lr": 0.1}, 100, ("scheduler.min_lr=0.1", "optim.lr=0.001")),
        (
            {**WSD, "decay_shape": "exp"},
            100,
            ("scheduler.decay_shape='exp'", "linear, cosine, 1-sqrt"),
        ),
    ):
        with pytest.raises(ConfigError) as e:
            check_pair(adamw, schedule_config(node), max_steps)
        assert all(p in str(e.value) for p in parts), str(e.value)


@pytest.mark.parametrize(
    "scheduler",
    [
        {"name": "cosine", "warmup_steps": 0},
        {"name": "constant", "warmup_steps": 100},
        WSD,
        {"name": "inverse_sqrt", "warmup_steps": 0},
    ],
)
def test_schedule_free_refuses_a_schedule_that_moves_the_lr(scheduler: dict) -> None:
    sf = optimizer_config({"name": "schedulefree", "lr": 1e-3})
    with pytest.raises(ConfigError) as e:
        check_pair(sf, schedule_config(scheduler), 1000)
    text = str(e.value)
    assert "optim=schedulefree" in text and f"scheduler={scheduler['name']}" in text
    assert "scheduler=none" in text and "optim.warmup_steps" in text
    check_pair(sf, schedule_config({"name": "none"}), 1000)  # accepted
    # a flat lr: accepted
    check_pair(sf, schedule_config({"name": "constant", "warmup_steps": 0}), 1000)


def test_a_checkpoint_restores_the_step_not_the_schedule() -> None:
    """Resuming with a longer horizon (or a cooldown branch) follows the new config's schedule from the saved step."""
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=1.0)
    short = schedule_config({**WSD, "warmup_steps": 0, "decay_shape": "linear"}).build(opt, 1.0, 10)
    for _ in range(5):
        opt.step()
        short.step()
    state = short.state_dict()
    assert state["last_epoch"] == 5 and state["lr_lambdas"] == [None]
    opt2 = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=1.0)
    long = schedule_config({**WSD, "warmup_steps": 0, "decay_shape": "linear"}).build(
        opt2, 1.0, 100
    )
    # an older file's
    long.load_state_dict({**state, "lr_lambdas": [{"total_steps": 10, "decay_start": 8}]})
    opt2.step()
    long.step()
    assert (
        long.last_epoch == 6
        and opt2.param_groups[0]["lr"] == 1.0
        and long.lr_lambdas[0].total_steps == 100
    )
