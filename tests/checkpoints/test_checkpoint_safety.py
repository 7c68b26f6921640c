"""Checkpoints: pickled objects are refused on every load path, writes are atomic, verified and
finite, a checkpoint that does not fit the config names every mismatched key and shape, and no
Hugging Face loader is ever allowed to run remote code."""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from src.checkpoints.fit import check_state_dict_fits
from src.checkpoints.io import SafeCheckpointIO, atomic_torch_save, safe_torch_load
from src.errors import CheckpointError
from src.training.runner import train

REPO = Path(__file__).resolve().parents[2]


class Payload:
    """Unpickling this would run ``touch <marker>``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


class PlainObject:
    """A harmless class, but still not something a weights-only load accepts."""


@pytest.fixture(scope="module")
def tiny_ckpt(
    tmp_path_factory: pytest.TempPathFactory,
    compose: Callable[..., Any],
    tiny: tuple[str, ...],
    token_cache: str,
) -> Path:
    """last.ckpt of a 4-step tiny run."""
    out = tmp_path_factory.mktemp("tiny-run")
    train(compose(*tiny, "trainer.max_steps=4", output_dir=out))
    return out / "checkpoints" / "last.ckpt"


def test_pickled_object_is_refused_on_every_load_path(
    tiny_ckpt: Path, compose: Callable[..., Any], tiny: tuple[str, ...], tmp_path: Path
) -> None:
    from src.checkpoints.load import load_checkpoint

    marker = tmp_path / "code-ran"
    evil = safe_torch_load(tiny_ckpt)
    evil["hyper_parameters"]["note"] = Payload(marker)
    path = tmp_path / "evil.ckpt"
    torch.save(evil, path)

    def refused(text: str) -> bool:  # the file, what it holds and why that is refused, the fix
        return (
            text.startswith(f"{path} holds pickled Python objects")
            and "it references posix.system" in text
            and "unpickling can run arbitrary code" in text
            and "re-save its contents as plain dicts/tensors" in text
        )

    for load in (safe_torch_load, load_checkpoint, SafeCheckpointIO().load_checkpoint):
        with pytest.raises(CheckpointError) as info:
            load(path)
        assert refused(str(info.value)), (load, str(info.value))

    # resuming a run: Lightning's fit(ckpt_path=...) goes through the plugin
    out = tmp_path / "resume"
    with pytest.raises(CheckpointError) as info:
        train(compose(*tiny, f"ckpt_path={path}", output_dir=out))
    assert refused(str(info.value))
    assert (
        json.loads((out / "metrics.json").read_text())["error"] == f"CheckpointError: {info.value}"
    )
    assert not marker.exists()  # no code from the file ever ran


def test_torn_checkpoint_is_reported(tiny_ckpt: Path, tmp_path: Path) -> None:
    torn = tmp_path / "torn.ckpt"
    torn.write_bytes(tiny_ckpt.read_bytes()[:5000])
    with pytest.raises(CheckpointError) as info:
        safe_torch_load(torn)
    text = str(info.value)
    assert text.startswith(f"{torn} is not a readable checkpoint (")
    # the fix: another checkpoint, or start fresh
    assert "checkpoints/last.ckpt" in text and "ckpt_path=null" in text


def test_resume_with_a_different_model_names_keys_shapes_and_settings(
    tiny_ckpt: Path, compose: Callable[..., Any], tiny: tuple[str, ...], tmp_path: Path
) -> None:
    with pytest.raises(CheckpointError) as info:
        train(compose(*tiny, "model.d_ff=128", f"ckpt_path={tiny_ckpt}", output_dir=tmp_path))
    text = str(info.value)
    assert text.startswith(
        f"{tiny_ckpt} does not fit the model built from this config (6 mismatched key(s)):\n"
        "  shape mismatches (6): "
    )
    assert (
        ": checkpoint [64, 32], model [128, 32]" in text
        and ": checkpoint [32, 64], model [32, 128]" in text
    )
    assert "\n  config differences: model.d_ff: checkpoint 64, config 128\n" in text
    assert ".hydra/config.yaml" in text and "ckpt_path=null" in text  # the fix


def test_mismatch_report_lists_every_kind() -> None:
    module = torch.nn.Linear(4, 3)
    module.cfg = {"model": {"d_model": 4, "name": "a"}}  # type: ignore[attr-defined]
    ckpt = {
        "state_dict": {"weight": torch.zeros(3, 8), "extra": torch.zeros(1)},
        "hyper_parameters": {"cfg": {"model": {"d_model": 8, "name": "b"}}},
    }
    with pytest.raises(CheckpointError) as info:
        check_state_dict_fits(module, ckpt, path="x.ckpt")
    lines = str(info.value).splitlines()
    assert lines[0].startswith("x.ckpt does not fit") and "(3 mismatched key(s))" in lines[0]
    assert lines[1:5] == [
        "  shape mismatches (1): weight: checkpoint [3, 8], model [3, 4]",  # one line per kind
        "  missing from the checkpoint (1): bias",
        "  unexpected in the checkpoint (1): extra",
        "  config differences: model.d_model: checkpoint 8, config 4",
    ]
    assert ".hydra/config.yaml" in lines[5] and "ckpt_path=null" in lines[5]  # the fix


# ---------------------------------------------------------------- writes


def _old_file(tmp_path: Path) -> tuple[Path, bytes]:
    dest = tmp_path / "last.ckpt"
    torch.save({"state_dict": {"w": torch.ones(2)}, "global_step": 1}, dest)
    return dest, dest.read_bytes()


def test_interrupted_save_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from src import files

    dest, old = _old_file(tmp_path)

    def interrupt(tmp: Path, path: Path) -> None:
        # the new file is complete, under its temp name
        assert len(list(tmp_path.glob(".last.ckpt.*.tmp"))) == 1
        raise KeyboardInterrupt

    monkeypatch.setattr(files, "_replace", interrupt)
    with pytest.raises(KeyboardInterrupt):
        atomic_torch_save({"state_dict": {"w": torch.zeros(2)}, "global_step": 2}, dest)
    assert dest.read_bytes() == old
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_full_disk_is_a_clear_error_and_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    dest, old = _old_file(tmp_path)

    def full(obj: Any, f: Any) -> None:
        f.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(CheckpointError) as info:
        SafeCheckpointIO().save_checkpoint(
            {"state_dict": {"w": torch.zeros(2)}, "global_step": 2}, dest
        )
    text = str(info.value)  # the file, the reason, what is kept, the fix
    assert text.startswith(f"could not write {dest} (No space left on device)")
    assert (
        "previous file at that path is kept" in text
        and "Free space" in text
        and "hydra.run.dir=" in text
    )
    assert dest.read_bytes() == old and not list(tmp_path.glob(".*.tmp"))


def test_next_save_removes_a_stale_temp_file(tmp_path: Path) -> None:
    dest, _ = _old_file(tmp_path)
    stale = tmp_path / ".last.ckpt.99999.tmp"  # left by a process killed mid-save
    stale.write_bytes(b"partial")
    SafeCheckpointIO().save_checkpoint(
        {"state_dict": {"w": torch.zeros(2)}, "global_step": 2}, dest
    )
    assert not stale.exists()
    assert safe_torch_load(dest)["global_step"] == 2


def test_refuses_to_write_nonfinite_weights(tmp_path: Path) -> None:
    dest, old = _old_file(tmp_path)
    bad = {
        "state_dict": {
            "w": torch.tensor([1.0, float("nan")]),
            "b": torch.tensor([float("inf")]),
            "ok": torch.zeros(2),
            "step": torch.tensor(3),
        }
    }
    with pytest.raises(CheckpointError) as info:
        SafeCheckpointIO().save_checkpoint(bad, dest)
    text = str(info.value)
    assert text.startswith(f"refusing to write {dest}: 2 tensor(s)") and "NaN/inf (w, b)" in text
    assert "previous file at that path is kept" in text and "docs/reliability.md" in text
    assert dest.read_bytes() == old


def test_refuses_to_write_what_a_weights_only_load_would_refuse(tmp_path: Path) -> None:
    dest, old = _old_file(tmp_path)
    with pytest.raises(CheckpointError) as info:
        SafeCheckpointIO().save_checkpoint(
            {"state_dict": {}, "callbacks": {"X": PlainObject()}}, dest
        )
    text = str(info.value)
    assert text.startswith(
        f"refusing to write {dest}: the checkpoint would not load with torch.load(weights_only=True) "
        f"(WeightsUnpickler error: Unsupported global: GLOBAL {__name__}.PlainObject"
    )
    assert (
        "store plain dicts/lists/numbers/tensors instead" in text
        and "previous file at that path is kept" in text
    )
    assert dest.read_bytes() == old
    assert not list(tmp_path.glob(".*.tmp"))


def test_training_uses_the_safe_plugin(compose: Callable[..., Any], tiny: tuple[str, ...]) -> None:
    from src.callbacks.nonfinite import NonFiniteGuard
    from src.config.validate import validate_run_config
    from src.training.setup import build_trainer

    trainer = build_trainer(validate_run_config(compose(*tiny)))
    assert isinstance(trainer.strategy.checkpoint_io, SafeCheckpointIO)
    guards = [c for c in trainer.callbacks if isinstance(c, NonFiniteGuard)]
    assert len(guards) == 1 and guards[0].action == "stop"


# ---------------------------------------------------------------- Hugging Face: no remote code


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


def test_no_hugging_face_loader_may_run_remote_code() -> None:
    """Every ``Auto*.from_pretrained`` in src/ passes ``trust_remote_code=False``; nothing passes True."""
    problems: list[str] = []
    for path in sorted((REPO / "src").rglob("*.py")):
        for call in _calls(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(REPO)}:{call.lineno}"
            kw = {k.arg: k.value for k in call.keywords}
            trust = kw.get("trust_remote_code")
            if trust is not None and not (isinstance(trust, ast.Constant) and trust.value is False):
                problems.append(f"{where}: trust_remote_code={ast.unparse(trust)}")
            f = call.func
            if (
                isinstance(f, ast.Attribute)
                and f.attr == "from_pretrained"
                and isinstance(f.value, ast.Name)
                and f.value.id.startswith("Auto")
                and trust is None
            ):
                problems.append(
                    f"{where}: {f.value.id}.from_pretrained without trust_remote_code=False"
                )
    assert not problems, problems
