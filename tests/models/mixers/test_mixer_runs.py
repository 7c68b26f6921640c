"""Every mixer and a hybrid train under ``fast_dev_run`` on ``data=mqar`` (objective=synthetic) and
on text (causal LM), and an encoder-decoder with mixers in its decoder trains on seq2seq."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from src.training import runner
from tests.training.conftest import TINY, compose_train

FAST = ["trainer.fast_dev_run=true", "trainer.accelerator=cpu", "trainer.precision=32"]
SMALL_TASK = ["data.val_examples=8", "data.test_examples=8", "data.num_pairs=4"]
MIXERS = {
    "linear_attention": ["model/mixer=linear_attention", "model.mixer.chunk_size=8"],
    "linear_attention_taylor": [
        "model/mixer=linear_attention",
        "model.mixer.feature_map=taylor",
        "model.mixer.feature_dim=4",
    ],
    "short_conv": ["model/mixer=short_conv"],
    "mamba2": ["model/mixer=mamba2", "model.mixer.d_state=8", "model.mixer.chunk_size=8"],
    "gated_deltanet": ["model/mixer=gated_deltanet", "model.mixer.chunk_size=8"],
    "hybrid": [
        "model/mixer=linear_attention",
        "model.layer_mixers=[linear_attention,short_conv,attention]",
        "model.n_layer=3",
        "model/position=rope",
    ],
}
DATA = {"text": [], "mqar": ["data=mqar", *SMALL_TASK]}


def _completed(run_dir: Path) -> dict:
    m = json.loads((run_dir / "metrics.json").read_text())
    assert m["status"] == "completed", m["error"]
    return m


@pytest.mark.parametrize("data", sorted(DATA))
@pytest.mark.parametrize("mixer", sorted(MIXERS))
def test_mixer_trains_under_fast_dev_run(mixer: str, data: str, tmp_path: Path) -> None:
    position = [] if mixer == "hybrid" else ["model/position=none"]
    cfg = compose_train([*TINY, *FAST, *position, *DATA[data], *MIXERS[mixer]], tmp_path)
    runner.train(cfg)
    assert _completed(tmp_path)["global_step"] == 1


def test_encoder_decoder_with_mixers_in_its_decoder_trains(tmp_path: Path) -> None:
    cfg = compose_train(
        [
            *TINY,
            *FAST,
            "model=transformer_base",
            "model.n_encoder_layer=1",
            "model.n_decoder_layer=2",
            "objective=seq2seq",
            "model/mixer=linear_attention",
            "model.layer_mixers=[linear_attention,attention]",
        ],
        tmp_path,
    )
    runner.train(cfg)
    assert _completed(tmp_path)["global_step"] == 1
