"""A run's config is validated once (STYLE.md, habit 14): for a run of each family, every check of
the composed config runs exactly one time, and the pieces downstream take the spec's parts
without checking them again."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.training.conftest import TINY, train_in_process

FAMILIES = {
    "decoder_only": [],
    "encoder_only": ["objective=masked_lm", "model.family=encoder_only", "model.mask=null"],
    "encoder_decoder": [
        "data=copy",
        "data.length=6",
        "data.val_examples=8",
        "data.test_examples=8",
        "data.test_lengths=[6]",
        "model.family=encoder_decoder",
        "model.mask=null",
        "model/position=sinusoidal",
    ],
}


def _count_everywhere(
    monkeypatch: pytest.MonkeyPatch, calls: Counter[str], name: str, fn: Callable[..., Any]
) -> None:
    """Count calls of ``fn`` through every module-level name bound to it (``from x import fn``)."""

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return fn(*args, **kwargs)

    for module in list(sys.modules.values()):
        for attr, value in list(vars(module).items() if module is not None else ()):
            if value is fn:
                monkeypatch.setattr(module, attr, counted)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_run_of_each_family_validates_its_config_once(
    family: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import src.training.runner  # noqa: F401  (every module that binds a check, loaded)
    from src.config.validate import validate_run_config
    from src.data.sources import check_source
    from src.models.config import ModelConfig
    from src.optim.base import OptimizerConfig, optimizer_config, schedule_config

    calls: Counter[str] = Counter()
    for name, fn in (
        ("validate_run_config", validate_run_config),
        ("check_source", check_source),
        ("optimizer_config", optimizer_config),
        ("schedule_config", schedule_config),
    ):
        _count_everywhere(monkeypatch, calls, name, fn)
    for cls, method in ((ModelConfig, "validate"), (OptimizerConfig, "__post_init__")):
        original = getattr(cls, method)

        def counted(self: Any, _original: Any = original, _name: str = method) -> None:
            calls[f"{type(self).__name__ if _name == 'validate' else 'optim'}.{_name}"] += 1
            _original(self)

        monkeypatch.setattr(cls, method, counted)
    train_in_process([*TINY, "seed=3", *FAMILIES[family]], tmp_path / "run")

    assert dict(calls) == {
        "validate_run_config": 1,
        "check_source": 1,
        "ModelConfig.validate": 1,
        "optimizer_config": 1,
        "schedule_config": 1,
        "optim.__post_init__": 1,
    }
