"""Length extrapolation (src.evaluation.extrapolation): numbers where positions allow, "not
applicable" for a learned table, and the window arithmetic."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.nn import functional as F

from src.evaluation.extrapolation import evaluate_lengths, metrics_from
from src.models import build_model


@pytest.fixture
def tokens() -> torch.Tensor:
    return torch.randint(0, 97, (1 + 4 * 32 * 4,), generator=torch.Generator().manual_seed(1))


def test_learned_positions_are_not_applicable_beyond_the_table(
    make_tiny_config: Callable[..., dict[str, Any]], tokens: torch.Tensor
) -> None:
    model = build_model(make_tiny_config(max_seq_len=32))  # learned table: 32 rows
    res = evaluate_lengths(model, tokens, train_length=32, factors=(1, 2, 4))
    assert res[0].ppl is not None and res[0].note is None
    for r in res[1:]:
        assert r.ppl is None and r.note is not None and "table has 32 rows" in r.note
    m = metrics_from(res, 32)
    assert m["extrapolation/ppl@2x"] is None and "not applicable" in m["extrapolation/note@2x"]


@pytest.mark.parametrize("position", ["rope", "alibi", "sinusoidal", "none"])
def test_relative_positions_give_numbers_at_every_length(
    make_tiny_config: Callable[..., dict[str, Any]], tokens: torch.Tensor, position: str
) -> None:
    model = build_model(make_tiny_config(max_seq_len=32, position={"name": position}))
    res = evaluate_lengths(model, tokens, train_length=32, factors=(1, 2, 4))
    assert [r.context_length for r in res] == [32, 64, 128]
    assert all(r.ppl is not None and math.isfinite(r.ppl) and r.note is None for r in res)
    assert len({r.tokens_scored for r in res}) == 1  # the same span at every length


def test_disjoint_windows_equal_a_direct_computation(
    make_tiny_config: Callable[..., dict[str, Any]], tokens: torch.Tensor
) -> None:
    model = build_model(make_tiny_config(max_seq_len=32, position={"name": "rope"})).eval()
    res = evaluate_lengths(model, tokens, train_length=32, factors=(2,))
    n = (tokens.numel() - 1) // 64 * 64
    x = tokens[:n].view(-1, 64)
    y = tokens[1 : n + 1].view(-1, 64)
    with torch.no_grad():
        loss = F.cross_entropy(model(input_ids=x).logits.reshape(-1, 97), y.reshape(-1))
    assert res[0].tokens_scored == n and res[0].loss == pytest.approx(float(loss), rel=1e-5)


def test_strided_windows_score_every_token_once(
    make_tiny_config: Callable[..., dict[str, Any]], tokens: torch.Tensor
) -> None:
    model = build_model(make_tiny_config(max_seq_len=32, position={"name": "alibi"}))
    disjoint = evaluate_lengths(model, tokens, 32, factors=(1,))[0]
    strided = evaluate_lengths(model, tokens, 32, factors=(1,), stride=8)[0]
    assert strided.tokens_scored == disjoint.tokens_scored  # windows end where the span ends
    assert strided.loss != pytest.approx(disjoint.loss, abs=1e-9)  # more context per token


def test_encoder_decoder_is_reported_not_applicable(
    make_tiny_config: Callable[..., dict[str, Any]], tokens: torch.Tensor
) -> None:
    model = build_model(make_tiny_config(family="encoder_decoder", position={"name": "rope"}))
    res = evaluate_lengths(model, tokens, 32, factors=(1, 2))
    assert all(r.ppl is None and "encoder_decoder" in (r.note or "") for r in res)


# -- RoPE scaling at evaluation time, on a model trained without it ------------------------------------------------
@pytest.mark.parametrize("scaling", ["linear", "dynamic", "yarn", "llama3"])
def test_a_scaling_override_rebuilds_the_model_with_its_weights(
    make_tiny_config: Callable[..., dict[str, Any]], tokens: torch.Tensor, scaling: str
) -> None:
    """Each length is scored by the model rebuilt with model.position.scaling = {name, factor: length / trained,
    original_max_seq_len: trained}: the same numbers as a model configured that way with the same weights."""
    from src.evaluation.extrapolation import with_scaling

    model = build_model(make_tiny_config(max_seq_len=32, position={"name": "rope"})).eval()
    res = evaluate_lengths(model, tokens, train_length=32, factors=(1, 2, 4), scaling=scaling)
    assert [r.scaling["factor"] for r in res] == [1.0, 2.0, 4.0]
    assert all(r.ppl is not None and math.isfinite(r.ppl) for r in res)
    plain = evaluate_lengths(model, tokens, train_length=32, factors=(1, 2, 4))
    node = dict(res[2].scaling)
    assert node.get("original_max_seq_len", 32) == 32
    by_hand = build_model(
        make_tiny_config(max_seq_len=32, position={"name": "rope", "scaling": node})
    ).eval()
    by_hand.load_state_dict(model.state_dict())
    assert evaluate_lengths(by_hand, tokens, 32, factors=(4,))[0].loss == pytest.approx(
        res[2].loss, rel=1e-6
    )
    scaled = with_scaling(model, node)
    # the model is untouched
    assert scaled.decoder.position.scaling is not None and model.decoder.position.scaling is None
    x = tokens[:128][None]
    with torch.no_grad():
        assert not torch.equal(scaled(x).logits, model(x).logits)  # the rotation at 4x differs
    # factor 1 at the trained length: as trained
    assert res[0].loss == pytest.approx(plain[0].loss, rel=1e-5)


def test_scaling_metrics_have_their_own_prefix(
    make_tiny_config: Callable[..., dict[str, Any]], tokens: torch.Tensor
) -> None:
    model = build_model(make_tiny_config(max_seq_len=32, position={"name": "rope"}))
    res = evaluate_lengths(model, tokens, 32, factors=(2,), scaling={"name": "yarn", "factor": 8.0})
    assert res[0].scaling == {
        "name": "yarn",
        "factor": 8.0,
        "original_max_seq_len": 32,
    }  # an explicit factor is kept
    m = metrics_from(res, 32, prefix="extrapolation/yarn")
    assert set(m) == {
        "extrapolation/yarn/train_length",
        "extrapolation/yarn/ppl@2x",
        "extrapolation/yarn/loss@2x",
    }


@pytest.mark.parametrize("position", ["alibi", "learned"])
def test_scaling_a_model_without_rotary_frequencies_fails_naming_the_key(
    make_tiny_config: Callable[..., dict[str, Any]], tokens: torch.Tensor, position: str
) -> None:
    from src.errors import ConfigError

    model = build_model(make_tiny_config(max_seq_len=32, position={"name": position}))
    with pytest.raises(
        ConfigError,
        match=rf"model.position.scaling is RoPE frequency scaling .* model/position={position}",
    ):
        evaluate_lengths(model, tokens, 32, factors=(1, 2), scaling="linear")
    with pytest.raises(
        ConfigError, match="model.position.scaling.name='ntk' is not a RoPE scaling type"
    ):
        evaluate_lengths(
            build_model(make_tiny_config(position={"name": "rope"})),
            tokens,
            32,
            factors=(1,),
            scaling="ntk",
        )
