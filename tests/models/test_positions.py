"""Position schemes: what each one makes the model (in)sensitive to, and their formulas."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

from src.models import build_model
from src.models.components.kv_cache import KVCache
from src.models.components.positions import (
    ALiBiPosition,
    PositionLimitError,
    RotaryPosition,
    SinusoidalPosition,
    alibi_slopes,
    sinusoid_table,
)

MakeConfig = Callable[..., dict[str, Any]]


def encoder(make_tiny_config: MakeConfig, position: str) -> torch.nn.Module:
    """A tiny BERT-shaped encoder (post-norm, embedding norm, bidirectional)."""
    cfg = make_tiny_config(
        family="encoder_only",
        position={"name": position},
        norm_placement="post",
        embedding_norm=True,
    )
    return build_model(cfg).eval()


def test_nope_encoder_is_permutation_equivariant(make_tiny_config: MakeConfig) -> None:
    """Without positions, bidirectional attention sees a set: permuting tokens permutes outputs."""
    model = encoder(make_tiny_config, "none")
    ids = torch.randint(0, 97, (2, 9))
    perm = torch.randperm(9)
    with torch.no_grad():
        out = model(ids).logits  # [B, T, V]
        out_perm = model(ids[:, perm]).logits
    torch.testing.assert_close(out_perm, out[:, perm], atol=1e-5, rtol=1e-5)


def test_learned_positions_break_permutation_equivariance(make_tiny_config: MakeConfig) -> None:
    model = encoder(make_tiny_config, "learned")
    ids = torch.randint(0, 97, (1, 9))
    perm = torch.arange(8, -1, -1)
    with torch.no_grad():
        assert not torch.allclose(model(ids[:, perm]).logits, model(ids).logits[:, perm], atol=1e-4)


@pytest.mark.parametrize("rotary_fraction", [1.0, 0.5])
def test_rope_scores_depend_only_on_relative_offset(rotary_fraction: float) -> None:
    """q·k after rotating at positions (m, n) equals the score at (m + s, n + s) (Su et al. 2021, eq. 16)."""
    D = 16
    rope = RotaryPosition(head_dim=D, rotary_fraction=rotary_fraction)
    q, k = torch.randn(1, 1, 1, D), torch.randn(1, 1, 1, D)  # [B, H, T=1, D]

    def score(m: int, n: int) -> torch.Tensor:
        qr, kr = rope.rotate(q, k, torch.tensor([m]), torch.tensor([n]))
        return (qr * kr).sum()

    for m, n in [(0, 0), (3, 1), (1, 5), (7, 7)]:
        for s in (1, 10, 123):
            torch.testing.assert_close(score(m + s, n + s), score(m, n), atol=1e-4, rtol=1e-4)
    # a different offset, a different score
    assert not torch.allclose(score(3, 1), score(3, 2), atol=1e-3)
    qr, _ = rope.rotate(q, k, torch.tensor([5]), torch.tensor([5]))
    torch.testing.assert_close(qr.norm(), q.norm())  # a rotation keeps the norm


def test_rope_rejects_odd_head_dim() -> None:
    with pytest.raises(ValueError, match="even head dimension"):
        RotaryPosition.check_args(head_dim=7)


def test_learned_positions_refuse_long_inputs(make_tiny_config: MakeConfig) -> None:
    model = build_model(make_tiny_config(max_seq_len=16)).eval()
    model(torch.zeros(1, 16, dtype=torch.long))  # exactly the table: fine
    msg = r"sequence length 17 exceeds the learned position table \(16 rows, model.max_seq_len=16\)"
    with pytest.raises(PositionLimitError, match=msg):
        model(torch.zeros(1, 17, dtype=torch.long))
    cache = KVCache(2)  # and through the cache: 12 cached + 5 new = 17
    model(torch.zeros(1, 12, dtype=torch.long), cache=cache)
    with pytest.raises(PositionLimitError, match=msg):
        model(torch.zeros(1, 5, dtype=torch.long), cache=cache)


@pytest.mark.parametrize("position", ["rope", "alibi", "sinusoidal", "none"])
def test_relative_and_fixed_positions_accept_long_inputs(
    make_tiny_config: MakeConfig, position: str
) -> None:
    model = build_model(make_tiny_config(max_seq_len=8, position={"name": position})).eval()
    assert model(torch.zeros(1, 20, dtype=torch.long)).logits.shape == (1, 20, 97)


def test_alibi_slopes_and_bias() -> None:
    """Press et al. 2022, §3: slopes 2^(-8/n·h) for h = 1..n; -m·|i - j| added to the scores."""
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0 ** -(h + 1) for h in range(8)]))
    torch.testing.assert_close(
        alibi_slopes(4), torch.tensor([2.0 ** -(2 * (h + 1)) for h in range(4)])
    )
    # 12 heads (not a power of two): the 8-head slopes, then every other slope of the 16-head set.
    s16 = [2.0 ** -(0.5 * (h + 1)) for h in range(16)]
    torch.testing.assert_close(
        alibi_slopes(12), torch.tensor([2.0 ** -(h + 1) for h in range(8)] + s16[0::2][:4])
    )

    alibi = ALiBiPosition(n_head=4)
    bias = alibi.score_bias(torch.arange(5), torch.arange(5))  # [H, T, S]
    assert bias.shape == (4, 5, 5)
    for h, m in enumerate(alibi_slopes(4).tolist()):
        for i in range(5):
            for j in range(5):
                assert bias[h, i, j].item() == pytest.approx(-m * abs(i - j))


def test_alibi_model_attends_less_far_away(make_tiny_config: MakeConfig) -> None:
    """With ALiBi and zeroed Q/K projections, scores are the bias alone: weights decay with distance."""
    model = build_model(make_tiny_config(position={"name": "alibi"})).eval()
    attn = model.decoder.blocks[0].attn
    with torch.no_grad():
        attn.qkv.weight[: 2 * 32].zero_()  # Q and K rows
        attn.qkv.bias[: 2 * 32].zero_()
    # [B, H, T, S]
    probs = model(torch.randint(0, 97, (1, 6)), output_attentions=True).attentions[0]
    last = probs[0, :, -1]  # [H, S]: how the last token spreads its attention
    assert (last[:, 1:] > last[:, :-1]).all()  # nearer keys get more weight, in every head
    ratio = last[:, -2] / last[:, -1]
    torch.testing.assert_close(ratio, torch.exp(-alibi_slopes(4)))


def test_sinusoidal_layouts_match_the_formula() -> None:
    """PE(pos, 2i) = sin(pos / 10000^(2i/C)), PE(pos, 2i+1) = cos(...) (Vaswani et al. 2017, §3.5).

    ``interleaved`` puts them in even/odd channels; ``concat`` puts sin in [0, C/2) and cos in [C/2, C).
    """
    C, P = 8, 12
    inter, concat = sinusoid_table(P, C, "interleaved"), sinusoid_table(P, C, "concat")
    for pos in range(P):
        for i in range(C // 2):
            angle = pos / 10000 ** (2 * i / C)
            assert inter[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert inter[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
            assert concat[pos, i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert concat[pos, C // 2 + i].item() == pytest.approx(math.cos(angle), abs=1e-6)
    # The same numbers, permuted: concat = interleaved with channels [0, 2, 4, 6, 1, 3, 5, 7].
    torch.testing.assert_close(concat, inter[:, [0, 2, 4, 6, 1, 3, 5, 7]])


@pytest.mark.parametrize("layout", ["interleaved", "concat"])
def test_sinusoidal_module_adds_the_table(layout: str) -> None:
    pos = SinusoidalPosition(d_model=8, layout=layout)
    x = torch.zeros(2, 5, 8)
    torch.testing.assert_close(
        pos.add_to_embeddings(x, torch.arange(3, 8)),
        sinusoid_table(8, 8, layout)[3:].expand(2, 5, 8),
    )
    with pytest.raises(ValueError, match="layout='spiral' is not known"):
        SinusoidalPosition(d_model=8, layout="spiral")
