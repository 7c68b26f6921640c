"""``python -m src.inspect probes``: the probe table of a transformers model (random weights, saved with
``save_pretrained`` to a temporary directory; never downloaded) and of one of our checkpoints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import open_dict
from rich.console import Console

from src.inspect import SUBCOMMANDS, main
from src.inspection.probes import run
from tests.conftest import CONF_DIR

transformers = pytest.importorskip("transformers")


def probes_cfg(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = compose("inspect_probes", overrides=list(overrides))
    with open_dict(cfg):
        cfg.pop("hydra", None)
    return cfg


def test_gpt2_dir_prints_a_row_per_layer_and_head(tmp_path: Path) -> None:
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=4)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(tmp_path / "gpt2")
    console = Console(record=True, width=120)
    result = run(probes_cfg(f"pretrained={tmp_path / 'gpt2'}", "batch_size=2"), console)
    text = console.export_text()
    assert "induction" in text and "prev. token" in text and "probe/lens_loss@L1" in text
    assert len(result.induction) == 2 and result.induction[0].shape == (4,)  # 2 layers x 4 heads
    assert "32 tokens" in text  # the default length: the longest that fits 32 positions, up to 64
    assert result.lens_loss[-1] == result.model_loss


def test_bert_dir_prints_entropy_and_sinks_and_says_what_it_skipped(tmp_path: Path) -> None:
    cfg = transformers.BertConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        pad_token_id=0,
    )
    transformers.BertForMaskedLM(cfg).save_pretrained(tmp_path / "bert")
    console = Console(record=True, width=160)
    result = run(
        probes_cfg(f"pretrained={tmp_path / 'bert'}", "batch_size=2", "length=16"), console
    )
    text = console.export_text()
    assert "skipped induction" in text and "does not predict left to right" in text
    assert not result.induction and len(result.entropy[""]) == 2


def test_probes_is_a_subcommand_and_needs_a_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert SUBCOMMANDS["probes"] == ("inspect_probes", "src.inspection.probes:run")
    with pytest.raises(SystemExit):
        main(["probes", "batch_size=2"])
    assert "set exactly one of pretrained=" in capsys.readouterr().err


def test_one_of_our_checkpoints_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.training.conftest import TINY, train_in_process

    train_in_process([*TINY, "trainer.max_steps=2"], tmp_path / "run")
    main(
        [
            "probes",
            f"ckpt_path={tmp_path / 'run' / 'checkpoints' / 'last.ckpt'}",
            "batch_size=2",
            "length=16",
            f"hydra.run.dir={tmp_path / 'inspect'}",
        ]
    )
    out = capsys.readouterr().out
    assert "decoder_only, 2 sequences of 16 tokens" in out and "probe/induction_max" in out
    rows = re.findall(r"^│\s+(\d+)\s+│\s+(\d+)\s+│", out, flags=re.M)  # (layer, head) of each row
    assert rows == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")]  # TINY: 2 layers x 2 heads
