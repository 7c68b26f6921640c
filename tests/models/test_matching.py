"""The matched-size solver (src.models.matching) hits its target within tolerance."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from src.errors import ConfigError
from src.models import build_model
from src.models.matching import MatchParams, count_parameters, match_model, report_match


def test_count_on_meta_equals_real_model(make_tiny_config: Callable[..., dict[str, Any]]) -> None:
    for cfg in (
        make_tiny_config(),
        make_tiny_config(ffn={"name": "swiglu"}),
        make_tiny_config(family="encoder_decoder", position={"name": "sinusoidal"}),
    ):
        assert count_parameters(cfg) == build_model(cfg).num_parameters()


def test_swiglu_matches_gelu_at_two_thirds_width(
    make_tiny_config: Callable[..., dict[str, Any]],
) -> None:
    gelu = make_tiny_config(d_ff=128)
    solved, r = match_model(
        dict(gelu, ffn={"name": "swiglu"}), MatchParams({"ffn": {"name": "gelu"}}, tolerance=0.01)
    )
    assert r.reference_params == count_parameters(gelu)
    assert abs(count_parameters(solved) - r.reference_params) <= 0.01 * r.reference_params
    assert r.params == count_parameters(solved) and r.solved == {"d_ff": solved["d_ff"]}
    # Shazeer 2020: ~2/3 of the GELU width
    assert solved["d_ff"] == pytest.approx(128 * 2 / 3, abs=3)


def test_no_position_table_gets_a_wider_ffn(
    make_tiny_config: Callable[..., dict[str, Any]],
) -> None:
    learned = make_tiny_config()
    solved, r = match_model(
        dict(learned, position={"name": "none"}),
        MatchParams({"position": {"name": "learned"}}, tolerance=0.005),
    )
    assert solved["d_ff"] > learned["d_ff"] and abs(r.rel_error) <= 0.005


def test_encoder_decoder_matches_decoder_only(
    make_tiny_config: Callable[..., dict[str, Any]],
) -> None:
    dec = make_tiny_config(n_layer=4, d_ff=128, mask={"name": "causal"})
    encdec = dict(dec, family="encoder_decoder", mask=None)
    solved, r = match_model(
        encdec, MatchParams({"family": "decoder_only", "mask": {"name": "causal"}}, solve="layers")
    )
    assert r.reference_params == count_parameters(dec)
    assert (solved["n_encoder_layer"], solved["n_decoder_layer"]) == (
        2,
        2,
    )  # the split nearest the configured width
    assert abs(r.rel_error) <= 0.01


def test_named_reference_keeps_the_run_vocabulary(
    make_tiny_config: Callable[..., dict[str, Any]],
) -> None:
    run = make_tiny_config(d_model=768, n_head=12, n_layer=12, max_seq_len=1024, vocab_size=50257)
    solved, r = match_model(run, MatchParams("gpt2_small", tolerance=1e-4))
    assert r.reference_params == 124_439_808  # GPT-2 small exactly (conf/model/gpt2_small.yaml)
    assert solved["d_ff"] == 3072 and r.params == 124_439_808


def test_errors_are_explicit(make_tiny_config: Callable[..., dict[str, Any]]) -> None:
    cfg = make_tiny_config()
    with pytest.raises(ConfigError, match="not a model config"):
        match_model(cfg, MatchParams("no_such_model"))
    with pytest.raises(ConfigError, match="solve='width'"):
        MatchParams({"d_ff": 100}, solve="width")
    with pytest.raises(ConfigError, match="tolerance=2"):
        MatchParams({"d_ff": 100}, tolerance=2)
    with pytest.raises(ConfigError, match="multiple_of=0"):
        MatchParams({"d_ff": 100}, multiple_of=0)
    # 64-multiples cannot hit a 1-unit change within 0.01%
    with pytest.raises(ConfigError, match="tolerance"):
        match_model(cfg, MatchParams({"d_ff": 65}, multiple_of=64, tolerance=1e-4))


def test_match_params_from_config_solves_the_model_and_report_match_writes_it(
    tmp_path, make_tiny_config: Callable[..., dict[str, Any]]
) -> None:
    plain = {
        "model": make_tiny_config(ffn={"name": "swiglu"}),
        "paths": {"output_dir": str(tmp_path)},
        "match_params": {
            "reference": {"ffn": {"name": "gelu"}},
            "solve": "d_ff",
            "tolerance": 0.01,
            "multiple_of": 1,
        },
    }
    params = MatchParams.from_config(plain)
    assert params is not None
    model, r = match_model(plain["model"], params)
    assert model["d_ff"] == r.solved["d_ff"] != 64
    assert plain["model"]["d_ff"] == 64  # pure: the plain config is unchanged
    report_match(r, tmp_path)
    saved = json.loads((tmp_path / "match_params.json").read_text())
    assert (
        saved["params"] == count_parameters(model)
        and saved["reference_params"] == r.reference_params
    )
    assert (
        MatchParams.from_config({"model": make_tiny_config(), "match_params": {"reference": None}})
        is None
    )
    with pytest.raises(ConfigError, match="match_params.tol=1 is not a key of match_params"):
        MatchParams.from_config(
            {"model": make_tiny_config(), "match_params": {"reference": "tiny", "tol": 1}}
        )


# --------------------------------------------------------------------------- budgets and FLOPs matching
def _budget(tmp_path, *overrides: str):
    from src.training.budget import run_budget
    from src.training.setup import build_run
    from tests.training.conftest import TINY, compose_train

    run = build_run(compose_train([*TINY, *overrides], tmp_path))
    return run, run_budget(run)


def test_budget_is_the_models_own_count(tmp_path) -> None:
    run, b = _budget(tmp_path, "trainer.max_steps=100")
    assert b.shape == {"batch_size": 4, "seq_len": 32} and b.tokens_per_step == 4 * 32
    # one formula, the model's
    assert b.flops_per_step == run.task.model.training_flops(batch_size=4, seq_len=32)
    assert (
        b.flops_per_token == b.flops_per_step / 128 and b.params == run.task.model.num_parameters()
    )
    assert b.to_dict()["planned_flops"] == 100 * b.flops_per_step and b.match == "none"
    _, acc = _budget(tmp_path, "trainer.accumulate_grad_batches=2")
    assert acc.tokens_per_step == 2 * b.tokens_per_step and acc.flops_per_token == b.flops_per_token


def test_flops_matching_gives_equal_training_flops(tmp_path) -> None:
    from src.training.budget import solve_steps

    _, ref = _budget(tmp_path, "trainer.max_steps=100")
    _, deep = _budget(tmp_path, "model.n_layer=3", "model.d_ff=96", "trainer.max_steps=100")
    assert deep.flops_per_step > 1.3 * ref.flops_per_step
    steps = solve_steps(ref, deep, "flops")
    assert (
        steps < 100
        and abs(steps * deep.flops_per_step - 100 * ref.flops_per_step)
        <= 0.01 * 100 * ref.flops_per_step
    )
    assert solve_steps(ref, deep, "tokens") == 100 and solve_steps(ref, deep, "params") == 100
    # half the tokens per step
    _, long = _budget(tmp_path, "block_size=16", "trainer.max_steps=100")
    assert solve_steps(ref, long, "tokens") == 200
    with pytest.raises(ConfigError, match="protocol.match='compute'"):
        solve_steps(ref, deep, "compute")


def test_flops_per_step_of_the_families_study(tmp_path) -> None:
    """Study 3 at matched parameters: the decoder reads "source <sep> target" through every layer,
    the encoder-decoder reads each side through half of them, so it costs about half the FLOPs
    per step, and FLOPs matching gives it about twice the steps."""
    from src.training.budget import run_budget, solve_steps
    from src.training.setup import build_run
    from tests.training.conftest import SHARED_DATA, compose_train

    if not (SHARED_DATA / "multi30k_en_de").is_dir():
        pytest.skip("Multi30k not in ../shared/data")
    budgets = {}
    for family in ("decoder_only", "encoder_decoder"):
        cfg = compose_train(
            [
                "experiment=study_families",
                f"+experiment/study_families={family}",
                f"paths.data_dir={SHARED_DATA}",
                "trainer.max_steps=300",
            ],
            tmp_path / family,
        )
        budgets[family] = run_budget(build_run(cfg))
    dec, encdec = budgets["decoder_only"], budgets["encoder_decoder"]
    assert (
        abs(dec.params - encdec.params) <= 0.01 * dec.params
        and dec.match == encdec.match == "params"
    )
    assert 1.6 < dec.flops_per_step / encdec.flops_per_step < 2.4
    steps = solve_steps(dec, encdec, "flops")
    assert (
        abs(steps * encdec.flops_per_step - 300 * dec.flops_per_step)
        <= 0.01 * 300 * dec.flops_per_step
    )
