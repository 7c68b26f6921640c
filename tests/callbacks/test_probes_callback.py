"""The probe callback in real (tiny, in-process) runs: every family and position under fast_dev_run,
bit-identical training with and without it, the run-level induction step in metrics.json (reached or
not), the logged curves, and its config errors."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from src.callbacks.probes import Probes
from src.errors import ConfigError
from src.training import runner
from tests.training.conftest import TINY, compose_train, read_csv_metrics, series

#: a tiny synthetic run per family (the synthetic tasks train every family but the encoder-only one)
SYNTH = [
    "model=tiny",
    "model.d_model=32",
    "model.n_layer=2",
    "model.n_head=2",
    "model.d_ff=64",
    "model.max_seq_len=64",
    "trainer=cpu",
    "batch_size=2",
    "trainer.enable_progress_bar=false",
    "trainer.enable_model_summary=false",
    "callbacks.progress_bar=null",
    "scheduler.warmup_steps=1",
    "data=copy",
    "data.length=8",
    "data.val_examples=4",
    "data.test_examples=4",
    "data.test_lengths=[8]",
    "trainer.fast_dev_run=true",
]
FAMILIES = {
    "decoder_only": SYNTH,
    "prefix_lm": [*SYNTH, "model/mask=prefix_lm"],
    "encoder_decoder": [*SYNTH, "model.family=encoder_decoder", "model.mask=null"],
    "encoder_only": [
        *TINY,
        "objective=masked_lm",
        "model.family=encoder_only",
        "model/mask=bidirectional",
        "trainer.fast_dev_run=true",
    ],
}
POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "t5_bias", "none")
DIAGONAL = {("decoder_only", p) for p in POSITIONS} | {
    ("prefix_lm", "t5_bias"),
    ("encoder_decoder", "rope"),
    ("encoder_only", "alibi"),
}


def metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


@pytest.mark.parametrize(
    "family,position",
    [
        pytest.param(f, p, marks=() if (f, p) in DIAGONAL else pytest.mark.slow)
        for f in FAMILIES
        for p in POSITIONS
    ],
)
def test_every_family_and_position_runs_the_callback(
    family: str, position: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="src.callbacks.probes")
    runner.train(
        compose_train(
            [
                *FAMILIES[family],
                f"model/position={position}",
                "callbacks.probes.every_n_steps=1",
                "callbacks.probes.length=16",
            ],
            tmp_path,
        )
    )
    m = metrics(tmp_path)
    assert m["status"] == "completed", m["error"]
    assert 0.0 <= m["probe/attn_entropy@L0"] <= 1.0 and 0.0 <= m["probe/sink_mass@L1"] <= 1.0
    if family == "encoder_only":
        assert "probe/induction_max" not in m and "probe/induction_step" not in m
        skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
        assert skipped == [
            "probes induction, prev_token, lens_loss, icl_score skipped: the encoder_only model does "
            "not predict left to right (each token sees the ones after it), so the probes of next-token "
            "prediction do not apply"
        ]  # one line, once per run (the callback probed twice)
        return
    assert 0.0 <= m["probe/induction_max"] <= 1.0 and 0.0 <= m["probe/prev_token_max"] <= 1.0
    assert m["probe/lens_loss@L1"] > 0 and "probe/induction@L1H1" in m
    assert m["probe/induction_step"] is None or m["probe/induction_step"] in (0, 1)
    if family == "encoder_decoder":
        assert "probe/attn_entropy@enc.L0" in m and "probe/sink_mass@cross.L1" in m
    if family == "prefix_lm":  # the default early position lies in the bidirectional prefix
        assert "probe/icl_score" not in m
        assert [r.getMessage()[:40] for r in caplog.records if "skipped" in r.getMessage()] == [
            "probe icl_score skipped: the early posit"
        ]
    else:
        assert "probe/icl_score" in m


def test_training_is_bit_identical_with_and_without_probes(tmp_path: Path) -> None:
    base = [
        *TINY,
        "trainer.max_steps=6",
        "trainer.val_check_interval=3",
        "model.dropout=0.1",
    ]  # dropout: the RNG matters
    runner.train(compose_train(base, tmp_path / "off"))
    runner.train(compose_train([*base, "callbacks.probes.every_n_steps=1"], tmp_path / "on"))
    off, on = read_csv_metrics(tmp_path / "off"), read_csv_metrics(tmp_path / "on")
    for key in ("train/loss", "val/loss"):
        # == on floats: bit for bit
        assert series(off, key) and series(off, key) == series(on, key), key
    assert metrics(tmp_path / "off")["test/loss"] == metrics(tmp_path / "on")["test/loss"]
    probed = series(on, "probe/induction_max")
    assert sorted(probed) == [0, 1, 2, 3, 4, 5, 6]  # before the first step, then after each
    assert not series(off, "probe/induction_max")


@pytest.mark.parametrize("threshold,reached", [(1e-6, True), (0.99, False)])
def test_induction_step_is_recorded_reached_or_not(
    threshold: float, reached: bool, tmp_path: Path
) -> None:
    runner.train(
        compose_train(
            [
                *TINY,
                "trainer.max_steps=4",
                "callbacks.probes.every_n_steps=2",
                f"callbacks.probes.induction_threshold={threshold}",
            ],
            tmp_path,
        )
    )
    m = metrics(tmp_path)
    if reached:
        assert m["probe/induction_step"] == 0 and "probe/induction_step_reason" not in m
        assert series(read_csv_metrics(tmp_path), "probe/induction_step") == {0: 0.0}
    else:
        assert m["probe/induction_step"] is None
        assert (
            m["probe/induction_step_reason"].startswith("not reached")
            and "0.99" in m["probe/induction_step_reason"]
        )


def test_probes_are_off_by_default(tmp_path: Path) -> None:
    runner.train(compose_train([*TINY, "trainer.max_steps=2"], tmp_path))
    assert not [k for k in metrics(tmp_path) if k.startswith("probe/")]


@pytest.mark.parametrize(
    "key,value",
    [("every_n_steps", -1), ("induction_threshold", 1.5), ("batch_size", 0), ("icl_early", 3)],
)
def test_bad_values_name_the_key(key: str, value: float) -> None:
    with pytest.raises(ConfigError) as e:
        Probes(**{key: value})
    assert f"callbacks.probes.{key}={value}" in str(e.value)


def test_a_length_beyond_the_position_table_fails_before_training(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        runner.train(
            compose_train(
                [
                    *TINY,
                    "trainer.max_steps=2",
                    "callbacks.probes.every_n_steps=1",
                    "callbacks.probes.length=64",
                ],
                tmp_path,
            )
        )
    assert "callbacks.probes.length=64" in str(e.value) and "32" in str(e.value)
