"""``python -m src.inspect coord_check`` (src/inspection/coord_check.py): under μP no kind of
activation grows with width, under SP the logits and hidden activations do, for every family."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

from src.inspect import main
from src.inspection.coord_check import KINDS, coord_check

TINY = dict(vocab_size=101, d_model=32, n_layer=2, n_head=4, d_ff=128, max_seq_len=32)
FAMILIES = {
    "decoder_only": {},
    "encoder_only": {"family": "encoder_only"},
    "encoder_decoder": {
        "family": "encoder_decoder",
        "n_encoder_layer": 2,
        "n_decoder_layer": 2,
        "decoder_start_token_id": 0,
    },
}
#: μP's slopes at widths 32-256 (measured: -0.66 to +0.06, the encoder's attention logits lowest;
#: the module docstring): flat within this band, and nothing grows
MUP_BAND = (-0.75, 0.3)


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_mup_stays_flat_and_sp_grows(family: str) -> None:
    result = coord_check({**TINY, **FAMILIES[family]}, [32, 64, 128, 256], steps=10)
    mup, sp = result.late_slopes("mup"), result.late_slopes("sp")
    lo, hi = MUP_BAND
    assert all(lo < mup[k] < hi for k in KINDS), mup
    assert abs(mup["embedding"]) < 0.1 and abs(mup["output_logits"]) < 0.3, mup
    # SP: the output logits grow clearly, the hidden activations faster
    assert sp["output_logits"] > 0.4, sp
    assert all(sp[k] > 1.0 for k in ("attn_logits", "attn_out", "ffn_out")), sp
    assert sp["output_logits"] > mup["output_logits"] + 0.4


def test_cli_writes_csv_and_png_and_prints_slopes(tmp_path: Path, capsys) -> None:
    main(
        [
            "coord_check",
            "model.vocab_size=101",
            "widths=[32,64]",
            "steps=2",
            "seq_len=8",
            f"out_dir={tmp_path}",
        ]
    )
    out = capsys.readouterr().out
    assert "output_logits" in out and out.count("\nsp ") + out.count("\nmup ") == 2
    rows = list(csv.DictReader((tmp_path / "coord_check.csv").open()))
    # 2 parametrizations × 2 widths × 2 steps × 5 kinds
    assert len(rows) == 2 * 2 * 2 * len(KINDS)
    assert {r["kind"] for r in rows} == set(KINDS)
    assert all(float(r["mean_abs_change"]) == 0 for r in rows if r["step"] == "0")
    assert (tmp_path / "coord_check.png").stat().st_size > 1000


def test_bad_widths_are_refused_in_one_line() -> None:
    from src.errors import ConfigError

    with pytest.raises(ConfigError, match="widths"):
        coord_check(TINY, [32])
    with pytest.raises(ConfigError, match="parametrizations"):
        coord_check(TINY, [32, 64], parametrizations=["ntk"])
