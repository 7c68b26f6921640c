"""T5's relative position bias (``model/position=t5_bias``): buckets equal transformers' (Mesh TF's)
bucketing in both directions, one table per stack shared by its layers, bidirectional buckets in
encoders and causal ones in decoders, and errors that name the key."""

from __future__ import annotations

import pytest
import torch

from src.errors import ConfigError
from src.models import build_model
from src.models.components.t5_bias import T5RelativeBias, relative_buckets
from tests.conftest import tiny_model_dict

transformers = pytest.importorskip("transformers")
from transformers.models.t5.modeling_t5 import T5Attention  # noqa: E402


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(("num_buckets", "max_distance"), [(32, 128), (16, 20), (8, 9), (4, 3)])
def test_buckets_equal_transformers(
    bidirectional: bool, num_buckets: int, max_distance: int
) -> None:
    # memory - query, [1, 601]
    relative = torch.arange(-300, 301)[None, :] - torch.zeros(1, 1, dtype=torch.long)
    expected = T5Attention._relative_position_bucket(
        relative, bidirectional, num_buckets, max_distance
    )
    got = relative_buckets(relative, bidirectional, num_buckets, max_distance)
    assert torch.equal(got, expected)
    assert int(got.max()) == num_buckets - 1 and int(got.min()) == 0


def test_bucket_layout_by_hand() -> None:
    """32 buckets, max 128. Causal: distances 0…15 exact, then 16 + ⌊ln(d/16)/ln(8)·16⌋ (127 -> 31),
    ≥ 128 in bucket 31. Bidirectional: 16 buckets per direction, 8 exact, then 8 + ⌊ln(d/8)/ln(16)·8⌋
    (15 -> 9, 16 -> 10); keys after the query in buckets 16…31."""
    d = torch.tensor([0, 1, 15, 16, 127, 128, 1000])
    assert relative_buckets(-d, False, 32, 128).tolist() == [0, 1, 15, 16, 31, 31, 31]
    # later keys share bucket 0 (masked anyway)
    assert relative_buckets(d, False, 32, 128).tolist() == [0] * 7
    assert relative_buckets(-d, True, 32, 128).tolist() == [0, 1, 9, 10, 15, 15, 15]
    assert relative_buckets(d, True, 32, 128).tolist() == [0, 17, 25, 26, 31, 31, 31]


def test_score_bias_is_the_table_at_the_buckets() -> None:
    pos = T5RelativeBias(n_head=3, causal=False, num_buckets=8, max_distance=16)
    q, k = torch.arange(4, 9), torch.arange(0, 9)  # 5 queries after a 4-token cache
    bias = pos.score_bias(q, k)  # [H, T, S]
    assert bias.shape == (3, 5, 9)
    buckets = relative_buckets(k[None, :] - q[:, None], True, 8, 16)
    torch.testing.assert_close(bias, pos.table.weight[buckets].permute(2, 0, 1))


@pytest.mark.parametrize("family", ["decoder_only", "encoder_only", "encoder_decoder"])
def test_one_table_per_stack_with_its_direction(family: str) -> None:
    model = build_model(
        tiny_model_dict(family=family, decoder_start_token_id=1, position={"name": "t5_bias"})
    )
    tables = {name: s.position for name, s in model.stacks().items()}
    assert all(
        isinstance(p, T5RelativeBias) and p.table.weight.shape == (32, 4) for p in tables.values()
    )
    n_tables = sum(1 for m in model.modules() if isinstance(m, T5RelativeBias))
    assert n_tables == len(tables)  # shared by every layer of its stack
    assert {name: p.causal for name, p in tables.items()} == (
        {"encoder": False, "decoder": True}
        if family == "encoder_decoder"
        else {"encoder": False}
        if family == "encoder_only"
        else {"decoder": True}
    )


def test_encoder_bias_tells_left_from_right() -> None:
    """Bidirectional buckets: a key 2 tokens to the right and one 2 to the left get different biases."""
    pos = T5RelativeBias(n_head=1, causal=False)
    b = pos.score_bias(torch.arange(5), torch.arange(5))[0]
    # direction matters, absolute position does not
    assert b[2, 4] != b[2, 0] and b[2, 3] == b[1, 2]


@pytest.mark.parametrize(
    ("node", "match"),
    [
        (
            {"name": "t5_bias", "num_buckets": 0},
            r"model.position.num_buckets=0 must be an integer >= 4",
        ),
        (
            {"name": "t5_bias", "num_buckets": -8},
            r"model.position.num_buckets=-8 must be an integer >= 4",
        ),
        (
            {"name": "t5_bias", "num_buckets": 32, "max_distance": 16},
            r"model.position.max_distance=16 must be an integer above",
        ),
    ],
)
def test_bad_values_name_the_key(node: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build_model(tiny_model_dict(position=node))
