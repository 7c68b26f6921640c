"""``python -m src.generate``'s own input checks (issue 21 item 14): an absurd ``num_samples`` (all samples
run as one batch: 1e9 was a MemoryError) and a ``prompt_file`` that is a FIFO are refused before the model
loads; an empty prompt for a tokenizer without an end-of-text token is a ``ConfigError``, not a ValueError
traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from src.errors import ConfigError, DataError
from src.evaluation.sampling import MAX_SAMPLES, check_args, sample
from tests.run_fixtures import token_cache  # noqa: F401  (pytest fixture: a private token cache)
from tests.training.conftest import TINY, train_in_process

REPO = Path(__file__).resolve().parents[2]


def cfg(**changes: object):
    base = OmegaConf.load(REPO / "conf" / "generate.yaml")
    base.pop("defaults", None)
    base.pop("hydra", None)
    base.merge_with(changes)
    return base


@pytest.mark.parametrize("n", [MAX_SAMPLES + 1, 10**9])
def test_an_absurd_num_samples_is_refused(n: int) -> None:
    with pytest.raises(ConfigError) as info:
        check_args(cfg(num_samples=n))
    assert f"num_samples={n}" in str(info.value) and str(MAX_SAMPLES) in str(info.value)
    check_args(cfg(num_samples=MAX_SAMPLES))


def test_a_fifo_prompt_file_is_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "prompt.txt"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError) as info:
        check_args(cfg(prompt_file=str(fifo)))
    assert f"prompt_file={fifo}" in str(info.value) and "FIFO" in str(info.value)


@pytest.fixture(scope="module")
def char_ckpt(tmp_path_factory: pytest.TempPathFactory, token_cache: str) -> str:
    run = tmp_path_factory.mktemp("run")
    # char tokenizer: no end-of-text token
    train_in_process([*TINY, "trainer.max_steps=2", "test=false"], run)
    return str(run / "checkpoints" / "last.ckpt")


def test_an_empty_prompt_without_an_eos_token_is_a_config_error(char_ckpt: str) -> None:
    with pytest.raises(ConfigError) as info:
        sample(
            cfg(ckpt_path=char_ckpt, prompt="", max_new_tokens=2, stream=False),
            write=lambda s: None,
        )
    assert "prompt=''" in str(info.value) and "char" in str(info.value)


def test_a_prompt_character_outside_the_vocabulary_is_named(char_ckpt: str, tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("To be \u20ac")  # no euro sign in the training text
    with pytest.raises(DataError) as info:
        sample(
            cfg(ckpt_path=char_ckpt, prompt_file=str(prompt), max_new_tokens=2, stream=False),
            write=lambda s: None,
        )
    assert "U+20AC" in str(info.value) and "position 6" in str(info.value)
    assert [
        len(t)
        for t in sample(
            cfg(ckpt_path=char_ckpt, prompt="To be", max_new_tokens=2, stream=False, greedy=True),
            write=lambda s: None,
        )
    ] == [2]
