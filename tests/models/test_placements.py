"""The placements beyond pre/post: sandwich (Ding et al. 2021), DeepNorm (Wang et al. 2022), ReZero
(Bachlechner et al. 2020). No reference implementation exists in transformers, so each is checked
against hand-worked values: DeepNet's α/β table, ReZero's identity at initialisation, sandwich's
extra norm per sublayer."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from src.errors import ConfigError
from src.inspection.params import parameter_table
from src.models import build_model
from src.models.components.attention import MultiHeadAttention
from src.models.components.block import Block
from src.models.components.deepnorm import DeepNorm, deepnorm_constants
from src.models.components.norms import LayerNorm, RMSNorm
from tests.conftest import tiny_model_dict

FAMILIES = {
    "decoder_only": {},
    "encoder_only": {"family": "encoder_only"},
    "encoder_decoder": {
        "family": "encoder_decoder",
        "decoder_start_token_id": 1,
        "n_encoder_layer": 2,
        "n_decoder_layer": 3,
    },
}

# (N encoder layers, M decoder layers, stack) -> (α, β), worked by hand from DeepNet's Table 1 / Figure 2:
# encoder-only (2N)^(1/4), (8N)^(-1/4); decoder-only (2M)^(1/4), (8M)^(-1/4);
# encoder-decoder encoder 0.81 (N⁴M)^(1/16), 0.87 (N⁴M)^(-1/16), decoder (3M)^(1/4), (12M)^(-1/4)
DEEPNET_TABLE = [
    (0, 6, "decoder", 1.8612, 0.3799),  # 12^(1/4); 48^(-1/4)
    (0, 12, "decoder", 2.2134, 0.3195),
    (18, 0, "encoder", 2.4495, 0.2887),  # √6; 1/√12
    (6, 6, "encoder", 1.4179, 0.4970),  # 6^(5/16) = 1.7505: 0.81 × 1.7505, 0.87 / 1.7505
    (6, 6, "decoder", 2.0598, 0.3433),  # 18^(1/4); 72^(-1/4)
    (18, 18, "encoder", 1.9987, 0.3526),  # 18^(5/16) = 2.4675
    (18, 18, "decoder", 2.7108, 0.2608),  # 54^(1/4); 216^(-1/4)
]


@pytest.mark.parametrize(("N", "M", "stack", "alpha", "beta"), DEEPNET_TABLE)
def test_deepnorm_constants_from_the_paper_table(
    N: int, M: int, stack: str, alpha: float, beta: float
) -> None:
    a, b = deepnorm_constants(N, M, stack)
    assert (a, b) == (pytest.approx(alpha, abs=1e-4), pytest.approx(beta, abs=1e-4))


def test_deepnorm_builds_each_stack_with_its_own_constants() -> None:
    model = build_model(tiny_model_dict(**FAMILIES["encoder_decoder"], norm_placement="deepnorm"))
    enc = {(r.alpha, r.beta) for r in model.encoder.modules() if isinstance(r, DeepNorm)}
    dec = {(r.alpha, r.beta) for r in model.decoder.modules() if isinstance(r, DeepNorm)}
    assert enc == {deepnorm_constants(2, 3, "encoder")} and dec == {
        deepnorm_constants(2, 3, "decoder")
    }
    only = build_model(tiny_model_dict(norm_placement="deepnorm", n_layer=4))
    assert {(r.alpha, r.beta) for r in only.modules() if isinstance(r, DeepNorm)} == {
        ((8) ** 0.25, (32) ** -0.25)
    }


def test_deepnorm_forward_is_post_norm_of_the_up_weighted_residual() -> None:
    res = DeepNorm(encoder_layers=0, decoder_layers=4, stack="decoder")
    norm, x = LayerNorm(8), torch.randn(2, 3, 8)
    f = nn.Linear(8, 8)
    torch.testing.assert_close(res(x, norm, f), norm(8**0.25 * x + f(x)))


def test_deepnorm_initialisation_gains() -> None:
    """Figure 2: xavier_normal_ gain β for the FFN, v and out; gain 1 for q and k (std = gain·√(2/(in+out)))."""
    torch.manual_seed(0)
    C, L = 128, 4
    model = build_model(
        tiny_model_dict(norm_placement="deepnorm", d_model=C, n_head=4, d_ff=4 * C, n_layer=L)
    )
    beta = (8 * L) ** -0.25
    block = model.decoder.blocks[0]
    w = block.attn.projection_weights()
    xavier = math.sqrt(2 / (C + C))
    for name, gain in (("q", 1.0), ("k", 1.0), ("v", beta), ("out", beta)):
        assert w[name].std().item() == pytest.approx(gain * xavier, rel=0.05), name
    assert block.ffn.up.weight.std().item() == pytest.approx(
        beta * math.sqrt(2 / (C + 4 * C)), rel=0.05
    )
    assert block.ffn.down.weight.std().item() == pytest.approx(
        beta * math.sqrt(2 / (C + 4 * C)), rel=0.05
    )
    # embeddings keep the family's init
    assert model.tok_embed.weight.std().item() == pytest.approx(0.02, rel=0.05)


def test_deepnorm_initialises_cross_attention_too() -> None:
    torch.manual_seed(0)
    model = build_model(
        tiny_model_dict(
            **FAMILIES["encoder_decoder"], norm_placement="deepnorm", d_model=128, n_head=4
        )
    )
    w = model.decoder.blocks[0].cross_attn.projection_weights()
    beta = deepnorm_constants(2, 3, "decoder")[1]
    assert w["k"].std().item() == pytest.approx(math.sqrt(2 / 256), rel=0.05)
    assert w["v"].std().item() == pytest.approx(beta * math.sqrt(2 / 256), rel=0.05)


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (
            {"family": "encoder_decoder", "decoder_start_token_id": 1, "n_decoder_layer": 0},
            "model.n_decoder_layer",
        ),
        (
            {
                "family": "encoder_decoder",
                "decoder_start_token_id": 1,
                "n_encoder_layer": 0,
                "n_decoder_layer": 2,
            },
            "model.n_encoder_layer",
        ),
    ],
)
def test_deepnorm_without_the_layer_counts_it_needs_fails(overrides: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=rf"deepnorm needs the number of \w+ layers .*{key}"):
        build_model(tiny_model_dict(norm_placement="deepnorm", **overrides))
    with pytest.raises(ConfigError, match="needs the number of decoder layers"):
        DeepNorm.check_args(encoder_layers=0, decoder_layers=0, stack="decoder")


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_rezero_is_the_identity_at_initialisation(family: str) -> None:
    """α = 0 in every sublayer: each stack returns its embeddings (no final norm), whatever the weights."""
    model = build_model(tiny_model_dict(**FAMILIES[family], norm_placement="rezero")).eval()
    ids = torch.randint(2, 97, (2, 7))
    assert all(
        b.attn_norm is None and b.ffn_norm is None for b in model.modules() if isinstance(b, Block)
    )
    assert all(s.final_norm is None for s in model.stacks().values())
    with torch.no_grad():
        for name, stack in model.stacks().items():
            x = model.embed(ids)
            embedded = stack.position.add_to_embeddings(x, torch.arange(7))
            memory = (
                model.encode(ids) if name == "decoder" and family == "encoder_decoder" else None
            )
            torch.testing.assert_close(stack(x, memory=memory).hidden, embedded)


def test_rezero_gates_learn() -> None:
    model = build_model(tiny_model_dict(norm_placement="rezero"))
    ids = torch.randint(2, 97, (2, 7))
    model(ids, labels=ids).loss.backward()
    gates = [
        m.alpha
        for m in model.modules()
        if hasattr(m, "alpha") and isinstance(m.alpha, nn.Parameter)
    ]
    assert len(gates) == 2 * 2 and all(g.grad is not None and g.grad.abs() > 0 for g in gates)


def _norms(block: Block) -> int:
    return sum(isinstance(m, (LayerNorm, RMSNorm)) for m in block.modules())


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_sandwich_has_one_more_norm_per_sublayer_than_pre(family: str, norm: str) -> None:
    pre, sandwich = (
        build_model(tiny_model_dict(**FAMILIES[family], norm_placement=p, norm={"name": norm}))
        for p in ("pre", "sandwich")
    )
    for name in pre.stacks():
        for a, b in zip(pre.stacks()[name].blocks, sandwich.stacks()[name].blocks):
            # 2 sublayers, 3 with cross-attention
            assert _norms(b) == _norms(a) + len(a.sublayers())
        assert sandwich.stacks()[name].final_norm is not None  # the final norm, as pre-norm
    assert sandwich.num_parameters() - pre.num_parameters() == sum(
        len(b.sublayers()) * (64 if norm == "layernorm" else 32)
        for s in pre.stacks().values()
        for b in s.blocks
    )
    rows = [
        r.component for r in parameter_table(sandwich).rows if r.component.startswith("norms (")
    ]
    expected = {"encoder_decoder": [f"norms ({norm} ×4)", f"norms ({norm} ×6)"]}.get(
        family, [f"norms ({norm} ×4)"]
    )
    assert rows == expected  # the inspect table counts the second norms with the block's


def test_sandwich_forward_normalises_the_sublayer_output() -> None:
    model = build_model(tiny_model_dict(norm_placement="sandwich"))
    block = model.decoder.blocks[0]
    x = torch.randn(1, 4, 32)
    f = nn.Linear(32, 32)
    torch.testing.assert_close(
        block.ffn_res(x, block.ffn_norm, f), x + block.ffn_res.norm(f(block.ffn_norm(x)))
    )


def test_attention_exposes_its_projections_as_views() -> None:
    attn = MultiHeadAttention(32, 4, 2)
    w = attn.projection_weights()
    assert [tuple(w[k].shape) for k in ("q", "k", "v", "out")] == [
        (32, 32),
        (16, 32),
        (16, 32),
        (32, 32),
    ]
    with torch.no_grad():
        w["v"].zero_()
    assert attn.qkv.weight[48:].abs().sum() == 0 and attn.qkv.weight[:48].abs().sum() > 0
