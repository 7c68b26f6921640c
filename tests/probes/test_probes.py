"""The probes of ``src.probes`` on models whose answer is known: a hand-built induction circuit, uniform
attention, the logit lens against the model's own loss, and the probes that do not apply."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from src.errors import ConfigError
from src.models import build_model
from src.probes import probe_batch, run_probes
from src.probes.attention_probes import attention_entropy, induction_scores
from src.probes.lens import logit_lens
from tests.conftest import tiny_model_dict

V, L = 16, 8  # vocabulary; tokens per copy
T = 2 * L
TOK, POS, PREV = (
    0,
    V,
    V + T,
)  # the residual stream's three subspaces: token, position, previous token
C = V + T + V
SHARP = 100.0  # score of a match (before the 1/sqrt(D) scale): softmax puts ~1 - 1e-5 on it


def hand_built_induction_model() -> torch.nn.Module:
    """A 2-layer, 1-head, attention-only decoder wired by hand (Olsson et al. 2022, Fig. "induction head").

    No norm anywhere: the ReZero placement is ``x + α·f(x)`` with no norm and no final norm, so the
    residual stream stays the sum of what is written into it; α = 1 for attention and α = 0 for the
    FFNs makes the model attention-only. Positions come from a learned table set to one-hot vectors
    (the easiest way to let a head find "the previous position"). The stream has three subspaces of
    one-hot vectors: the token [0, V), the position [V, V+T) and the previous token [V+T, C).

    * layer 0, previous-token head: query p asks for position p−1 (q = e_pos(p−1), k = e_pos(j)); the
      value copies the key's token into the previous-token subspace;
    * layer 1, induction head: query p (token t) asks for a key whose previous token is t
      (q = e_prev(t), k = e_prev(token before j)): in the second copy that is p − L + 1, the token after
      t's earlier occurrence.
    """
    model = build_model(
        tiny_model_dict(
            vocab_size=V,
            d_model=C,
            n_head=1,
            n_layer=2,
            d_ff=8,
            max_seq_len=T,
            bias=False,
            tie_embeddings=False,
            norm_placement="rezero",
            position={"name": "learned"},
        )
    )
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        eye = torch.eye(V)
        model.tok_embed.weight[:, TOK : TOK + V] = eye
        model.decoder.position.table.weight[:, POS : POS + T] = torch.eye(T)
        b0, b1 = model.decoder.blocks
        for block in (b0, b1):
            block.attn_res.alpha.fill_(1.0)  # attention on, FFN off (alpha stays 0)
            block.attn.out.weight.copy_(torch.eye(C))
        q0, k0, v0 = b0.attn.qkv.weight.split(C)  # [C, C] views of the fused [3C, C]
        for p in range(1, T):
            q0[POS + p - 1, POS + p] = SHARP
        k0[POS : POS + T, POS : POS + T] = torch.eye(T)
        v0[PREV : PREV + V, TOK : TOK + V] = eye
        q1, k1, _ = b1.attn.qkv.weight.split(C)
        q1[PREV : PREV + V, TOK : TOK + V] = SHARP * eye
        k1[PREV : PREV + V, PREV : PREV + V] = eye
    return model.eval()


def test_hand_built_circuit_scores_previous_token_and_induction_heads() -> None:
    model = hand_built_induction_model()
    result = run_probes(model, probe_batch(model, batch_size=8, length=T, seed=0))
    assert float(result.prev_token[0][0]) >= 0.9  # layer 0 is the previous-token head
    assert float(result.induction[1][0]) >= 0.9  # layer 1 is the induction head
    # and not the other way round (layer 1's first-copy queries find no
    assert float(result.induction[0][0]) < 0.1
    # match and spread evenly, so some of their mass lands on p - 1)
    assert float(result.prev_token[1][0]) < 0.2
    m = result.metrics()
    assert m["probe/induction_max"] == pytest.approx(float(result.induction[1][0]))
    assert m["probe/induction@L1H0"] >= 0.9 and m["probe/prev_token_max"] >= 0.9
    # a sharp head: entropy near 0 (layer 1 is uniform on the first copy)
    assert m["probe/attn_entropy@L0"] < 0.05


def test_uniform_attention_scores_about_one_over_T() -> None:
    """q = k = 0: every query spreads evenly over the keys it sees (causal: p + 1 of them)."""
    model = build_model(tiny_model_dict(position={"name": "none"})).eval()
    with torch.no_grad():
        for block in model.decoder.blocks:
            block.attn.qkv.weight[
                : 2 * 32
            ].zero_()  # the q and k rows of the fused projection (d_model 32)
            block.attn.qkv.bias[: 2 * 32].zero_()
    length = 32
    result = run_probes(model, probe_batch(model, batch_size=4, length=length, seed=1))
    half = length // 2
    expected = sum(1 / (p + 1) for p in range(half, length)) / half  # key p - L + 1 gets 1/(p+1)
    for scores in result.induction:
        torch.testing.assert_close(scores, torch.full_like(scores, expected))
    assert 1 / length < expected < 2 / length  # "about 1/T"
    sink = sum(1 / (p + 1) for p in range(1, length)) / (length - 1)
    for layer in range(2):
        # uniform = 1 after normalising
        assert result.entropy[""][layer].mean().item() == pytest.approx(1.0, abs=1e-5)
        assert result.sink[""][layer].mean().item() == pytest.approx(sink, abs=1e-6)


def test_induction_of_hand_made_probabilities() -> None:
    """The key of the induction score: query p of the second copy -> key p - L + 1 (stream offset 0 and 1)."""
    probs = torch.zeros(1, 1, 8, 8)
    for p in range(4, 8):
        probs[0, 0, p, p - 3] = 1.0
    assert induction_scores(probs, period=4).item() == 1.0
    # queries 5..7 of a start-token stream
    assert induction_scores(probs, period=4, offset=1).item() == 1.0
    uniform = torch.full((1, 2, 3, 3), 1 / 3)
    assert attention_entropy(uniform, torch.full((1, 3), 3)).tolist() == pytest.approx([1.0, 1.0])


@pytest.mark.parametrize(
    "family,extra",
    [
        ("decoder_only", {}),
        (
            "decoder_only",
            {"norm_placement": "post"},
        ),  # no final norm: the lens reads the block output as it is
        ("decoder_only", {"mask": {"name": "prefix_lm"}, "norm": {"name": "rmsnorm"}}),
        (
            "encoder_decoder",
            {"n_encoder_layer": 2, "n_decoder_layer": 2, "decoder_start_token_id": 0},
        ),
    ],
)
def test_logit_lens_at_the_last_layer_is_the_model_loss(family: str, extra: dict[str, Any]) -> None:
    model = build_model(tiny_model_dict(family=family, **extra)).eval()
    batch = probe_batch(model, batch_size=4, length=16, seed=2)
    lens = logit_lens(model, batch)
    assert len(lens.layer_loss) == 2
    with torch.no_grad():
        own = model(**batch.forward, labels=batch.tokens).loss
    assert lens.layer_loss[-1] == float(own) == lens.model_loss
    assert lens.layer_loss[0] != lens.layer_loss[-1]


def test_encoder_only_skips_the_left_to_right_probes_with_a_reason() -> None:
    model = build_model(tiny_model_dict(family="encoder_only", position={"name": "rope"})).eval()
    result = run_probes(model, probe_batch(model, batch_size=2, length=16, seed=0))
    assert sorted(result.skipped) == ["icl_score", "induction", "lens_loss", "prev_token"]
    assert "encoder_only" in result.skipped["induction"]
    assert sorted(result.metrics()) == [
        "probe/attn_entropy@L0",
        "probe/attn_entropy@L1",
        "probe/sink_mass@L0",
        "probe/sink_mass@L1",
    ]


def test_the_probe_batch_never_touches_the_global_rng() -> None:
    model = build_model(tiny_model_dict())
    state = torch.random.get_rng_state()
    a = probe_batch(model, batch_size=3, length=16, seed=5)
    assert torch.equal(torch.random.get_rng_state(), state)
    # fixed by the seed
    assert torch.equal(a.tokens, probe_batch(model, batch_size=3, length=16, seed=5).tokens)
    assert torch.equal(a.tokens[:, :8], a.tokens[:, 8:])  # two copies
    assert all(len(set(row.tolist())) == 8 for row in a.tokens[:, :8])  # of distinct tokens


@pytest.mark.parametrize(
    "length,needle", [(15, "even integer"), (200, "vocabulary"), (64, "position table")]
)
def test_a_probe_length_that_cannot_work_is_a_config_error(length: int, needle: str) -> None:
    model = build_model(
        tiny_model_dict(
            vocab_size=97 if length != 200 else 50, max_seq_len=32 if length == 64 else 512
        )
    )
    with pytest.raises(ConfigError, match=needle) as e:
        probe_batch(model, batch_size=2, length=length, seed=0)
    assert f"length={length}" in str(e.value)
