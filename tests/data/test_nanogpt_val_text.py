"""``data.val_text=nanogpt`` (Tiny Shakespeare): validation on nanoGPT's own val text, the last 10%
of input.txt, for the speedrun against nanoGPT; no distinct test text is left, so test=true is refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from src.config.validate import Hardware, validate_run_config
from src.data.sources import build_source
from src.errors import DataError
from tests.data.conftest import shared
from tests.run_fixtures import compose  # noqa: F401  (pytest fixture)


def _text(tmp_path: Path) -> Path:
    path = tmp_path / "input.txt"
    # 12,790 characters
    path.write_text("".join(f"Line {i}: to be or not to be.\n" for i in range(400)))
    return path


def test_nanogpt_val_text_is_nanogpts_cut(tmp_path: Path, cache_dir: str) -> None:
    path = _text(tmp_path)
    text = path.read_text()
    src = build_source(
        {
            "name": "tinyshakespeare",
            "path": str(path),
            "cache_dir": cache_dir,
            "val_text": "nanogpt",
        }
    )
    s = src.splits()
    n = len(text)
    # nanoGPT data/shakespeare_char/prepare.py: train_data = data[:int(n*0.9)], val_data = data[int(n*0.9):]
    assert s["train"] == [text[: int(n * 0.9)]] and s["val"] == [text[int(n * 0.9) :]]
    assert s["test"] == s["val"]  # no distinct text left: the run must set test=false


def test_on_input_txt_the_training_text_is_the_same_and_val_is_ours_plus_test(
    cache_dir: str,
) -> None:
    path = str(shared("tinyshakespeare", "input.txt"))
    theirs = build_source(
        {"name": "tinyshakespeare", "path": path, "cache_dir": cache_dir, "val_text": "nanogpt"}
    ).splits()
    ours = build_source({"name": "tinyshakespeare", "path": path, "cache_dir": cache_dir}).splits()
    assert (len(theirs["train"][0]), len(theirs["val"][0])) == (
        1003854,
        111540,
    )  # nanoGPT's train.bin / val.bin
    assert ours["train"] == theirs["train"]
    # our val and test cut nanoGPT's val text in two
    assert ours["val"][0] + ours["test"][0] == theirs["val"][0]


def test_the_token_cache_follows_the_val_text(tmp_path: Path, cache_dir: str) -> None:
    path = str(_text(tmp_path))
    ours = build_source(
        {"name": "tinyshakespeare", "path": path, "cache_dir": cache_dir}
    ).fingerprint()
    theirs = build_source(
        {"name": "tinyshakespeare", "path": path, "cache_dir": cache_dir, "val_text": "nanogpt"}
    ).fingerprint()
    assert ours != theirs and theirs["val_text"] == "nanogpt"
    assert "val_text" not in ours  # caches written before the option keep their key


def test_an_unknown_val_text_names_the_key(tmp_path: Path, cache_dir: str) -> None:
    with pytest.raises(
        DataError,
        match=r"data\.val_text='nanogtp' is invalid \(did you mean data\.val_text=nanogpt\?\)",
    ):
        build_source(
            {
                "name": "tinyshakespeare",
                "path": str(_text(tmp_path)),
                "cache_dir": cache_dir,
                "val_text": "nanogtp",
            }
        )


def test_nanogpt_val_text_refuses_a_test_pass(compose: Callable[..., Any], tmp_path: Path) -> None:
    path = str(_text(tmp_path))
    cpu = Hardware(cuda_available=False, cuda_count=0, bf16_supported=False)
    with pytest.raises(DataError, match=r"data\.val_text=nanogpt.*set test=false"):
        validate_run_config(
            compose(
                "data=tinyshakespeare",
                f"data.path={path}",
                "tokenizer=char",
                "data.val_text=nanogpt",
                "test=true",
            ),
            hardware=cpu,
        )
    validate_run_config(
        compose(
            "data=tinyshakespeare",
            f"data.path={path}",
            "tokenizer=char",
            "data.val_text=nanogpt",
            "test=false",
        ),
        hardware=cpu,
    )
    validate_run_config(
        compose("data=tinyshakespeare", f"data.path={path}", "tokenizer=char", "test=true"),
        hardware=cpu,
    )
