"""Mixers in models (model/mixer, model.layer_mixers): the refusals, the state cache's greedy
generation against the full forward, FLOPs against torch's counter, parameter matching."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from src.errors import ConfigError
from src.models import build_model
from src.models.config import ModelConfig
from src.models.generation import generate
from src.models.matching import MatchParams, count_parameters, match_model
from src.models.mixers.base import MIXERS
from tests.conftest import tiny_model_dict

LINEAR = {"name": "linear_attention", "chunk_size": 5}
MIXES: dict[str, dict[str, Any]] = {
    "linear_attention": {"mixer": LINEAR},
    "linear_attention_taylor": {"mixer": {**LINEAR, "feature_map": "taylor", "feature_dim": 4}},
    "short_conv": {"mixer": {"name": "short_conv", "d_conv": 3}},
    "hybrid": {"mixer": LINEAR, "layer_mixers": ["linear_attention", "attention"]},
    "mamba2": {"mixer": {"name": "mamba2", "d_state": 8, "chunk_size": 5, "head_dim": None}},
    "gated_deltanet": {"mixer": {"name": "gated_deltanet", "chunk_size": 5, "head_dim": None}},
    "hybrid_gated_deltanet": {
        "mixer": {"name": "gated_deltanet", "chunk_size": 5, "head_dim": None},
        "layer_mixers": ["gated_deltanet", "gated_deltanet", "gated_deltanet", "attention"],
        "n_layer": 4,
    },
    "hybrid_conv_rope": {
        "mixer": {"name": "short_conv"},
        "layer_mixers": ["short_conv", "attention"],
        "position": {"name": "rope"},
    },
}


def _model(**overrides: Any) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(tiny_model_dict(**overrides)).eval()


@pytest.mark.parametrize("case", sorted(MIXES))
def test_greedy_generation_with_the_state_cache_equals_the_full_forward(case: str) -> None:
    model = _model(**MIXES[case])
    prompt = torch.randint(0, 97, (2, 7))
    seq = generate(model, prompt, 12)
    assert seq.shape == (2, 19)
    with torch.no_grad():
        logits = model(seq.clone()).logits  # [B, 19, V]
    # the token chosen at step t is the full forward's argmax at position t - 1
    assert torch.equal(logits[:, 6:-1].argmax(-1), seq[:, 7:])
    uncached = generate(model, prompt, 12, use_cache=False)
    assert torch.equal(uncached, seq)


def test_encoder_decoder_decoder_takes_the_mixer() -> None:
    model = _model(family="encoder_decoder", mask=None, decoder_start_token_id=0, **MIXES["hybrid"])
    assert [b.recurrent for b in model.decoder.blocks] == [True, False]
    assert not any(b.recurrent for b in model.encoder.blocks)
    src = torch.randint(0, 97, (2, 6))
    seq = generate(model, src, 8)
    with torch.no_grad():
        logits = model(input_ids=src, decoder_input_ids=seq[:, :-1].clone()).logits
    assert torch.equal(logits.argmax(-1), seq[:, 1:])


def test_default_attention_is_todays_model() -> None:
    """model/mixer=attention builds the same modules and parameters as a config without it."""
    a = _model()
    b = _model(mixer={"name": "attention"}, layer_mixers=["attention"])
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("case", sorted(MIXES))
def test_forward_flops_match_the_flop_counter(case: str) -> None:
    model = _model(**MIXES[case])
    ids = torch.randint(0, 97, (3, 23))  # 23: chunks of 5 do not divide it
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as c, torch.no_grad():
        model(ids)
    assert model.forward_flops(3, 23) == c.get_total_flops()


@pytest.mark.parametrize("node", [LINEAR, {"name": "short_conv", "d_conv": 4}])
@pytest.mark.parametrize("T", [1, 8, 10, 13])
def test_mixer_forward_flops_match_the_flop_counter(node: dict[str, Any], T: int) -> None:
    mixer = MIXERS.build(node, d_model=32, n_head=4)
    x = torch.randn(2, T, 32)
    with FlopCounterMode(display=False) as c, torch.no_grad():
        mixer(x, mixer.init_state(2, x.device, x.dtype))
    assert mixer.forward_flops(2, T) == c.get_total_flops()


@pytest.mark.parametrize(
    "case", ["linear_attention", "short_conv", "hybrid", "mamba2", "gated_deltanet"]
)
def test_match_params_knows_every_mixer(case: str) -> None:
    run = tiny_model_dict(**MIXES[case], d_ff=128)
    solved, r = match_model(run, MatchParams({"mixer": {"name": "attention"}}, tolerance=0.02))
    assert r.reference_params == count_parameters(tiny_model_dict(d_ff=128))
    assert abs(count_parameters(solved) - r.reference_params) <= 0.02 * r.reference_params


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"mixer": {"name": "linear_atention"}}, ["linear_atention", "linear_attention"]),
        ({"layer_mixers": []}, ["model.layer_mixers"]),
        ({"layer_mixers": ["attention", "mamba9"]}, ["model.layer_mixers", "mamba9"]),
        ({"mixer": {**LINEAR, "chunk_size": 0}}, ["model.mixer.chunk_size", "positive"]),
        ({"mixer": {**LINEAR, "window": 3}}, ["window"]),
        ({"mixer": LINEAR, "d_model": 30, "n_head": 4}, ["model.n_head=4", "model.d_model=30"]),
        ({"mixer": LINEAR, "position": {"name": "rope"}}, ["model/position=rope", "none"]),
        ({"mixer": LINEAR, "position": {"name": "alibi"}}, ["model/position=alibi"]),
        ({"mixer": LINEAR, "mask": {"name": "prefix_lm"}}, ["prefix_lm", "model/mask=causal"]),
        ({"mixer": LINEAR, "sinks": {"name": "token"}}, ["model/sinks=token"]),
        (
            {"mixer": LINEAR, "family": "encoder_only", "mask": None},
            ["encoder_only", "model/mixer=attention"],
        ),
    ],
)
def test_refusals_are_one_line(overrides: dict[str, Any], named: list[str]) -> None:
    with pytest.raises(ConfigError) as e:
        ModelConfig.from_dict(tiny_model_dict(**overrides))
    msg = str(e.value)
    assert "\n" not in msg and all(n in msg for n in named), msg


@pytest.mark.parametrize(
    "overrides",
    [
        {"mixer": LINEAR, "position": {"name": "none"}},
        {"mixer": LINEAR, "position": {"name": "sinusoidal"}},
        {
            "mixer": LINEAR,
            "layer_mixers": ["linear_attention", "attention"],
            "position": {"name": "rope"},
        },
        {
            "mixer": LINEAR,
            "sinks": {"name": "learned"},
            "layer_mixers": ["attention", "linear_attention"],
        },
        {"mixer": LINEAR, "mask": {"name": "sliding_window", "window": 4}},
    ],
)
def test_accepted(overrides: dict[str, Any]) -> None:
    ModelConfig.from_dict(tiny_model_dict(**overrides))


def test_document_ids_refused_with_a_mixer() -> None:
    model = _model(**MIXES["hybrid"])
    ids = torch.randint(0, 97, (1, 8))
    with pytest.raises(ValueError, match="data.document_mask=false"):
        model(ids, document_ids=torch.zeros_like(ids))


def test_cache_reorders_states() -> None:
    model = _model(**MIXES["hybrid"])
    d = model.start_decoding(torch.randint(0, 97, (3, 5)), 4)
    model.decode_step(d)
    S, z = d.cache.states[0]
    d.cache.reorder(torch.tensor([2, 0]))
    assert torch.equal(d.cache.states[0][0], S[[2, 0]]) and d.cache.states[1] is None


def test_layer_mixers_entries_take_the_mixer_keys_or_their_defaults() -> None:
    model = _model(
        mixer={"name": "linear_attention", "chunk_size": 3},
        layer_mixers=["linear_attention", "short_conv", "mamba2", "attention"],
        n_layer=4,
    )
    la, conv, mamba, attn = (b.attn for b in model.decoder.blocks)
    assert la.chunk_size == 3 and conv.d_conv == 4  # model.mixer's keys; short_conv's defaults
    assert (mamba.d_state, mamba.chunk_size) == (128, 64)  # mamba2's own defaults
    assert not model.decoder.blocks[3].recurrent


def test_a_layer_mixers_entry_keeps_its_own_head_size_not_the_attentions() -> None:
    # model.mixer=attention, d_model 32 over 4 heads (8 channels each): a mamba2 entry's head is
    # its YAML default, E / n_head = 2·32 / 4 = 16 channels, not the attention's 8
    model = _model(layer_mixers=["attention", "mamba2"], n_layer=2)
    mamba = model.decoder.blocks[1].attn
    assert mamba.head_dim == mamba.d_inner // model.config.n_head
