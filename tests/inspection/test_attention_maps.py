"""``python -m src.inspect attention``: the matrices behind the heatmaps, and the files written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from src.inspect import main
from src.inspection.attention_maps import attention_maps, save_maps, select
from src.models import build_model

MakeConfig = Callable[..., dict[str, Any]]


def check_rows(probs: torch.Tensor) -> None:
    """probs [H, T, S]: a distribution over keys for every query."""
    torch.testing.assert_close(probs.sum(-1), torch.ones(probs.shape[:-1]))
    assert (probs >= 0).all()


def test_decoder_maps_are_causal_distributions(make_tiny_config: MakeConfig) -> None:
    model = build_model(make_tiny_config())
    maps = attention_maps(model, torch.randint(0, 97, (1, 9)))
    assert [m.name for m in maps] == ["layer 0", "layer 1"]
    for m in maps:
        assert m.probs.shape == (4, 9, 9)  # [H, T, S]
        check_rows(m.probs)
        assert torch.equal(m.probs.triu(1), torch.zeros_like(m.probs))  # nothing above the diagonal
        assert len(m.queries) == len(m.keys) == 9


def test_layer_selection_and_encoder_maps(make_tiny_config: MakeConfig) -> None:
    model = build_model(make_tiny_config(family="encoder_only", norm_placement="post"))
    (m,) = attention_maps(model, torch.randint(0, 97, (1, 6)), layers=[-1])
    assert m.layer == 1
    check_rows(m.probs)
    assert (m.probs > 0).all()  # bidirectional: every key visible
    with pytest.raises(ValueError, match="layer 2 does not exist: the model has 2 layers"):
        attention_maps(model, torch.randint(0, 97, (1, 6)), layers=[2])
    assert select([0, -1], 12, "head") == [0, 11]


def test_encoder_decoder_maps(make_tiny_config: MakeConfig) -> None:
    model = build_model(make_tiny_config(family="encoder_decoder", decoder_start_token_id=0))
    maps = attention_maps(
        model, torch.randint(1, 97, (1, 7)), decoder_input_ids=torch.randint(1, 97, (1, 4))
    )
    by_kind = {(m.kind, m.layer): m.probs for m in maps}
    assert set(by_kind) == {(k, i) for k in ("encoder", "decoder", "cross") for i in (0, 1)}
    assert by_kind[("encoder", 0)].shape == (4, 7, 7)
    assert by_kind[("decoder", 0)].shape == (4, 4, 4)
    assert by_kind[("cross", 1)].shape == (4, 4, 7)  # decoder queries, encoder keys
    for probs in by_kind.values():
        check_rows(probs)
    assert torch.equal(by_kind[("decoder", 1)].triu(1), torch.zeros(4, 4, 4))


def test_save_maps_writes_png_npy_pt(make_tiny_config: MakeConfig, tmp_path: Path) -> None:
    model = build_model(make_tiny_config())
    maps = attention_maps(model, torch.randint(0, 97, (1, 5)))
    written = save_maps(maps, heads=[0, 3], out_dir=tmp_path, title="tiny")
    assert {p.name for p in written} == {
        "layer00.png",
        "layer00.npy",
        "layer01.png",
        "layer01.npy",
        "attention.pt",
    }
    assert (tmp_path / "layer00.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = np.load(tmp_path / "layer01.npy")
    # [h, T, S], the chosen heads
    np.testing.assert_array_equal(saved, maps[1].probs[[0, 3]].numpy())
    bundle = torch.load(tmp_path / "attention.pt", weights_only=True)
    torch.testing.assert_close(bundle["maps"]["layer00"], maps[0].probs)  # every head
    assert bundle["queries"]["layer00"] == maps[0].queries


def test_cli_attention_subcommand_dispatches_to_its_config(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``attention`` switches to conf/inspect_attention.yaml, whose run needs a model source."""
    with pytest.raises(SystemExit):
        main(["attention", "layers=[0]"])
    assert "set exactly one of pretrained=" in capsys.readouterr().err


@pytest.mark.slow  # exports a checkpoint with transformers (~5 s)
def test_cli_attention_subcommand_on_a_pretrained_dir(
    make_tiny_config: MakeConfig, tmp_path: Path
) -> None:
    """``python -m src.inspect attention pretrained=<dir>``, with a tiny GPT-2 written by to_hf."""
    from src.models.hf import to_hf

    model = build_model(make_tiny_config(vocab_size=50257, bos_token_id=50256, eos_token_id=50256))
    to_hf(model, tmp_path / "hf")
    out = tmp_path / "maps"
    main(["attention", f"pretrained={tmp_path / 'hf'}", "text=The cat sat on the mat.", "layers=[-1]", "heads=[1]",
          f"out_dir={out}"])  # fmt: skip
    assert sorted(p.name for p in out.iterdir()) == ["attention.pt", "layer01.npy", "layer01.png"]
    probs = torch.from_numpy(np.load(out / "layer01.npy"))  # [1, T, T]: head 1 only
    assert probs.shape == (1, 7, 7)  # "The| cat| sat| on| the| mat|." in GPT-2 BPE
    check_rows(probs)
    assert torch.equal(probs.triu(1), torch.zeros_like(probs))
    bundle = torch.load(out / "attention.pt", weights_only=True)
    assert bundle["queries"]["layer01"] == ["The", " cat", " sat", " on", " the", " mat", "."]
