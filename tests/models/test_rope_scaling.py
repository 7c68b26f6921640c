"""RoPE scaling (``model.position.scaling``): each type's frequencies against transformers'
``ROPE_INIT_FUNCTIONS`` (the model-level logit parity is in tests/models/hf/test_rope_parity.py),
what each scheme does to the rotation, and the errors for bad values."""

from __future__ import annotations

import pytest
import torch

from src.errors import ConfigError
from src.models import build_model
from src.models.components.positions import RotaryPosition
from src.models.components.rope_scaling import ROPE_SCALINGS, base_inv_freq
from tests.conftest import tiny_model_dict

transformers = pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

THETA, D, L0 = 10000.0, 64, 64  # theta, rotated channels (head_dim), training length
CASES = [
    ({"name": "linear", "factor": 4.0}, {"rope_type": "linear", "factor": 4.0}),
    ({"name": "dynamic", "factor": 2.0}, {"rope_type": "dynamic", "factor": 2.0}),
    (
        {"name": "yarn", "factor": 8.0},
        {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": L0},
    ),
    (
        {"name": "yarn", "factor": 4.0, "beta_fast": 16, "beta_slow": 2, "truncate": False},
        {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": L0,
            "beta_fast": 16,
            "beta_slow": 2,
            "truncate": False,
        },
    ),
    (
        {"name": "yarn", "factor": 4.0, "mscale": 0.707, "mscale_all_dim": 0.707},
        {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": L0,
            "mscale": 0.707,
            "mscale_all_dim": 0.707,
        },
    ),
    (
        {"name": "llama3", "factor": 8.0},
        {
            "rope_type": "llama3",
            "factor": 8.0,
            "original_max_position_embeddings": L0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
        },
    ),
    (
        {"name": "llama3", "factor": 4.0, "low_freq_factor": 2.0, "high_freq_factor": 8.0},
        {
            "rope_type": "llama3",
            "factor": 4.0,
            "original_max_position_embeddings": L0,
            "low_freq_factor": 2.0,
            "high_freq_factor": 8.0,
        },
    ),
]


@pytest.mark.parametrize(("ours", "theirs"), CASES, ids=[str(o) for o, _ in CASES])
@pytest.mark.parametrize("length", [16, L0, 3 * L0])
def test_frequencies_match_transformers(ours: dict, theirs: dict, length: int) -> None:
    cfg = transformers.LlamaConfig(
        hidden_size=4 * D,
        num_attention_heads=4,
        max_position_embeddings=L0,
        rope_parameters={"rope_theta": THETA, **theirs},
    )
    expected, factor = ROPE_INIT_FUNCTIONS[theirs["rope_type"]](
        cfg, torch.device("cpu"), seq_len=length
    )
    scaling = ROPE_SCALINGS.build(ours, max_seq_len=L0)
    got = scaling.inv_freq(THETA, D, torch.tensor(length))
    torch.testing.assert_close(got, expected, atol=0, rtol=1e-6)
    assert scaling.attention_factor == pytest.approx(factor)


def test_linear_is_position_interpolation() -> None:
    """Chen et al. 2023: with factor s, position s·p rotates as position p did without scaling."""
    plain, pi = RotaryPosition(16), RotaryPosition(16, scaling={"name": "linear", "factor": 4.0})
    q = torch.randn(1, 1, 5, 16)
    p = torch.arange(5)
    torch.testing.assert_close(
        pi.rotate(q, q, 4 * p, 4 * p)[0], plain.rotate(q, q, p, p)[0], atol=1e-5, rtol=0
    )


def test_dynamic_changes_only_beyond_the_original_length() -> None:
    """Up to L₀ dynamic NTK is plain RoPE; at L > L₀ every position (the earlier ones too) turns slower,
    by the base of the current length."""
    plain = RotaryPosition(16, max_seq_len=16)
    dynamic = RotaryPosition(16, max_seq_len=16, scaling={"name": "dynamic", "factor": 2.0})
    q = torch.randn(1, 1, 24, 16)
    short, long = torch.arange(16), torch.arange(24)
    torch.testing.assert_close(
        dynamic.rotate(q[:, :, :16], q[:, :, :16], short, short)[0],
        plain.rotate(q[:, :, :16], q[:, :, :16], short, short)[0],
    )
    at_long = dynamic.rotate(q, q, long, long)[0]
    assert not torch.allclose(
        at_long[:, :, 1:16], plain.rotate(q, q, long, long)[0][:, :, 1:16], atol=1e-3
    )
    # transformers' _compute_dynamic_ntk_parameters
    base = 10000.0 * ((2.0 * 24 / 16) - 1) ** (16 / 14)
    torch.testing.assert_close(at_long, RotaryPosition(16, theta=base).rotate(q, q, long, long)[0])
    model = build_model(
        tiny_model_dict(
            max_seq_len=16, position={"name": "rope", "scaling": {"name": "dynamic", "factor": 2}}
        )
    )
    assert (
        model.cache_limit == 16
        and build_model(tiny_model_dict(position={"name": "rope"})).cache_limit is None
    )


def test_yarn_temperature_scales_the_scores() -> None:
    """Peng et al. 2023 §3.4: cos and sin × (0.1 ln s + 1), so q·k × (0.1 ln s + 1)²."""
    yarn = RotaryPosition(16, max_seq_len=32, scaling={"name": "yarn", "factor": 4.0})
    assert yarn.attention_factor == pytest.approx(0.1 * torch.log(torch.tensor(4.0)).item() + 1)
    q = torch.randn(1, 1, 1, 16)
    # position 0: no turn
    qr, kr = yarn.rotate(q, q, torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long))
    torch.testing.assert_close((qr * kr).sum(), (q * q).sum() * yarn.attention_factor**2)


def test_scaling_composes_with_partial_rotary() -> None:
    rope = RotaryPosition(
        16, max_seq_len=32, rotary_fraction=0.5, scaling={"name": "yarn", "factor": 2.0}
    )
    assert rope.inv_freq.shape == (4,)
    # the highest frequency is kept
    torch.testing.assert_close(rope.inv_freq[:1], base_inv_freq(10000.0, 8)[:1])


@pytest.mark.parametrize(
    ("position", "match"),
    [
        (
            {"name": "rope", "scaling": {"name": "ntk", "factor": 2}},
            r"model.position.scaling.name='ntk' is not a RoPE scaling type; use 'linear', 'dynamic', 'yarn' or 'llama3'",
        ),
        (
            {"name": "rope", "scaling": {"name": "yarn"}},
            r"model.position.scaling \(yarn\) needs a factor",
        ),
        (
            {"name": "rope", "scaling": {"name": "linear", "factor": 0.5}},
            r"model.position.scaling.factor=0.5 must be a number >= 1",
        ),
        (
            {"name": "rope", "scaling": {"name": "linear", "factor": 2, "beta": 3}},
            r"model.position.scaling: rope_scaling.beta=3 is not a key of rope_scaling=linear",
        ),
        (
            {
                "name": "rope",
                "scaling": {"name": "yarn", "factor": 2, "beta_fast": 1, "beta_slow": 32},
            },
            "beta_fast=1 must be >= beta_slow",
        ),
        (
            {"name": "rope", "scaling": {"name": "yarn", "factor": 2, "original_max_seq_len": 0}},
            "original_max_seq_len=0 must be a positive",
        ),
        (
            {"name": "alibi", "scaling": {"name": "linear", "factor": 2}},
            r"model.position.scaling is RoPE frequency scaling .* model/position=alibi has no rotary frequencies",
        ),
        (
            {"name": "t5_bias", "scaling": {"name": "linear", "factor": 2}},
            r"model/position=t5_bias has no rotary frequencies",
        ),
    ],
)
def test_bad_scaling_names_the_key(position: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build_model(tiny_model_dict(position=position))
