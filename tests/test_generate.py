"""``python -m src.generate``'s own input checks (issue 21 item 14): an absurd ``num_samples`` (all samples
run as one batch: 1e9 was a MemoryError) and a ``prompt_file`` that is a FIFO are refused before the model
loads; an empty prompt for a tokenizer without an end-of-text token is a ``ConfigError``, not a ValueError
traceback."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from src.errors import ConfigError
from src.generate import MAX_SAMPLES, check_args, sample
from tests.training.conftest import TINY, train_in_process

REPO = Path(__file__).resolve().parents[1]


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


def test_an_empty_prompt_without_an_eos_token_is_a_config_error(tmp_path: Path) -> None:
    run = tmp_path / "run"
    train_in_process([*TINY, "trainer.max_steps=2", "test=false"], run)  # char tokenizer: no end-of-text token
    with pytest.raises(ConfigError) as info:
        sample(cfg(ckpt_path=str(run / "checkpoints" / "last.ckpt"), prompt="", max_new_tokens=2, stream=False),
               write=lambda s: None)
    assert "prompt=''" in str(info.value) and "char" in str(info.value)
