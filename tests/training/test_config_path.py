"""The path one model key takes from the composed run config to the built model (issue 51): every
call that hands ``model.norm_placement`` on (the value itself, a model node holding it, the
``ModelConfig`` or the ``RunSpec``) goes down the import order of docs/ARCHITECTURE.md or stays in its package, and
the value passes through fewer files than the 17 it crossed before the run spec was typed once.

The path is traced, not read: ``sys.setprofile`` sees every call into ``src/`` while the run is
validated and built, and keeps those whose arguments carry the value."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from types import FrameType, MappingProxyType
from typing import Any

from omegaconf import DictConfig

from tests.test_architecture import REPO, SRC, declared_layers, module_name, unit_of
from tests.training.conftest import TINY, compose_train

#: a placement no other key of the tiny config takes as its value
PLACEMENT = "sandwich"


def _carries(value: Any) -> bool:
    from src.config.spec import RunSpec
    from src.models.config import ModelConfig

    if isinstance(value, RunSpec):
        return _carries(value.model)
    if isinstance(value, str):
        return value == PLACEMENT
    if isinstance(value, ModelConfig):
        return value.norm_placement == PLACEMENT
    if isinstance(value, (DictConfig, Mapping, MappingProxyType)):
        return PLACEMENT in (value.get("norm_placement"), value.get("name"))
    return False


def _trace(work: Any) -> list[tuple[str, str, str]]:
    """``(caller file, callee file, callee function)`` for each call into src/ whose arguments
    carry the placement, in call order."""
    calls: list[tuple[str, str, str]] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if event != "call" or not code.co_filename.startswith(str(SRC)):
            return
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        if not any(_carries(frame.f_locals.get(n)) for n in names):
            return
        caller = frame.f_back
        while caller is not None and not caller.f_code.co_filename.startswith(str(SRC)):
            caller = caller.f_back
        if caller is not None:
            calls.append((caller.f_code.co_filename, code.co_filename, code.co_qualname))

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return calls


def test_norm_placement_goes_down_the_layers_to_the_model(tmp_path: Path) -> None:
    from src.config.validate import validate_run_config
    from src.training.setup import build_run

    cfg = compose_train([*TINY, f"model.norm_placement={PLACEMENT}"], tmp_path / "run")
    built: dict[str, Any] = {}

    def validate_and_build() -> None:
        built["run"] = build_run(validate_run_config(cfg))

    calls = _trace(validate_and_build)
    block = built["run"].task.model.decoder.blocks[0]
    assert type(block.attn_res).registry_name == PLACEMENT

    layers = declared_layers()

    def unit(path: str) -> str:
        return unit_of(module_name(Path(path))) or "?"

    upward = [
        f"{Path(a).relative_to(REPO)} -> {Path(b).relative_to(REPO)}::{fn}"
        for a, b, fn in calls
        if unit(a) != unit(b) and layers[unit(b)] > layers[unit(a)]
    ]
    assert not upward, "calls that climb the import order:\n" + "\n".join(upward)
    # the entry point and the runner hand on the whole run config; then the traced files
    files = {"src/train.py", "src/training/runner.py"}
    files |= {str(Path(f).relative_to(REPO)) for call in calls for f in call[:2]}
    assert {"src/models/config.py", "src/models/builder.py", "src/registry.py"} <= files
    assert len(files) < 17, sorted(files)
