"""model/parametrization=sp|mup (src/models/components/parametrization.py): sp is the scheme and one
rate as before, bit for bit; mup follows Yang et al. 2022 (TP5 Table 3 / Table 8)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from src.errors import ConfigError
from src.models import ModelConfig, build_model
from src.models.components.block import Block
from src.optim.base import optimizer_config

TINY = dict(vocab_size=61, d_model=128, n_layer=2, n_head=4, d_ff=512, max_seq_len=16)
MUP = {"name": "mup", "base_d_model": 32}  # m = 4
FAMILIES = {
    "decoder_only": {},
    "encoder_only": {"family": "encoder_only"},
    "encoder_decoder": {"family": "encoder_decoder", "n_encoder_layer": 2, "n_decoder_layer": 2},
}


def build(seed: int = 0, **kw) -> nn.Module:
    torch.manual_seed(seed)
    return build_model(ModelConfig.from_dict({**TINY, **kw}))


def forward(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    extra = {"decoder_input_ids": ids} if model.config.family == "encoder_decoder" else {}
    return model(ids, labels=ids, **extra).loss


# ---------------------------------------------------------------- sp: today's, bit for bit


#: (Σ p, Σ p², loss) of the seed-0 tiny model of each family, measured with the code before
#: parametrizations existed (same torch): sp must reproduce them exactly
BEFORE = {
    "decoder_only": (645.8008629939225, 751.774639479038, 4.1444993019104),
    "encoder_only": (749.4489545952345, 886.2565958978507, 4.156816482543945),
    "encoder_decoder": (1544.6291356298377, 1781.3359634086642, 3.0134947299957275),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_sp_is_the_default_and_bit_identical_to_before(family: str):
    default = build(**FAMILIES[family])
    sp = build(parametrization={"name": "sp"}, **FAMILIES[family])
    assert default.config.parametrization == {"name": "sp"}
    for (n, p), (_, q) in zip(default.named_parameters(), sp.named_parameters(), strict=True):
        assert torch.equal(p, q), n
    with torch.no_grad():
        total = sum(float(p.double().sum()) for p in sp.parameters())
        squares = sum(float((p.double() ** 2).sum()) for p in sp.parameters())
        torch.manual_seed(1)
        loss = float(forward(sp, torch.randint(0, 61, (2, 8))))
    assert (total, squares, loss) == BEFORE[family]


def test_sp_keeps_one_rate_two_groups_and_the_usual_attention_and_logits():
    model = build()
    assert model.lr_multipliers("adam") == {} and model.lr_multipliers("sgd") == {}
    opt = optimizer_config({"name": "adamw", "lr": 1e-3, "weight_decay": 0.1}).build(
        model, torch.device("cpu")
    )
    assert len(opt.param_groups) == 2 and all(g["lr"] == 1e-3 for g in opt.param_groups)
    assert all(b.attn.scale is None for b in model.decoder.blocks)  # 1/√D
    h = torch.randn(2, 3, 128)
    assert torch.equal(model.logits(h), model.head(h))


def test_gpt2_small_is_still_124_439_808_parameters_under_sp():
    from hydra import compose, initialize_config_dir

    from tests.models.test_model_configs import CONF

    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose(config_name="inspect", overrides=["model=gpt2_small"]).model
    assert cfg.parametrization.name == "sp"
    with torch.device("meta"):
        assert build_model(cfg).num_parameters() == 124_439_808


# ---------------------------------------------------------------- mup


@pytest.mark.parametrize("family", FAMILIES)
def test_mup_init_rates_attention_and_output(family: str):
    model = build(parametrization=MUP, **FAMILIES[family])
    m = 4.0
    assert model.parametrization.width_mult == m
    named = dict(model.named_parameters())
    ups = [p for n, p in named.items() if n.endswith("ffn.up.weight")]
    downs = [p for n, p in named.items() if n.endswith("ffn.down.weight")]
    n_res = 2 * sum(1 for x in model.modules() if isinstance(x, Block))
    # Table 3: hidden init variance ∝ 1/fan_in: the base width's std / √m
    up_std = torch.cat([p.flatten() for p in ups]).std().item()
    down_std = torch.cat([p.flatten() for p in downs]).std().item()
    assert up_std == pytest.approx(0.02 / math.sqrt(m), rel=0.1)
    assert down_std == pytest.approx(0.02 / math.sqrt(n_res) / math.sqrt(m), rel=0.1)
    assert model.tok_embed.weight.std().item() == pytest.approx(0.02, rel=0.1)  # input: unscaled
    # 1/D attention, every attention (self and cross)
    attns = [x for x in model.modules() if hasattr(x, "scale") and hasattr(x, "head_dim")]
    assert attns and all(a.scale == 1 / 32 for a in attns)
    # Table 8: the logits are multiplied by 1/m in logits()
    h = torch.randn(2, 3, 128)
    head_in = model.transform(h) if hasattr(model, "transform") else h
    torch.testing.assert_close(model.logits(h), model.head(head_in / m)[..., :61])
    # Adam: hidden matrices lr/m (the MLM transform's dense too), everything else η
    mults = model.lr_multipliers("adam")
    hidden = {id(p) for n, p in named.items() if p.dim() == 2 and "embed" not in n}
    hidden -= {id(model.head.weight), *(id(p) for n, p in named.items() if "position" in n)}
    assert set(mults) == hidden and set(mults.values()) == {1 / m}
    # SGD: vector-like (embeddings, biases, gains) η·m, hidden η
    sgd = model.lr_multipliers("sgd")
    assert sgd[id(model.tok_embed.weight)] == m and not set(sgd) & hidden
    # it trains
    loss = forward(model, torch.randint(0, 61, (2, 8)))
    loss.backward()
    assert torch.isfinite(loss)


def test_mup_at_the_base_width_has_sp_weights_but_a_zero_query():
    sp, mup = build(), build(parametrization={"name": "mup", "base_d_model": 128})
    for (n, p), (_, q) in zip(sp.named_parameters(), mup.named_parameters(), strict=True):
        if n.endswith("attn.qkv.weight"):
            assert torch.count_nonzero(q[:128]) == 0  # the query rows
            assert torch.equal(p[128:], q[128:]), n
        else:
            assert torch.equal(p, q), n
    assert mup.lr_multipliers("adam") == {}


def _groups(model: nn.Module, optim: dict) -> dict[int, dict]:
    opt = optimizer_config(optim).build(model, torch.device("cpu"))
    return {id(p): g for g in opt.param_groups for p in g["params"]}


@pytest.mark.parametrize("name", ["adamw", "lion", "schedulefree"])
def test_adam_type_optimisers_scale_hidden_rates_and_keep_lr_times_decay(name: str):
    model = build(parametrization=MUP)
    groups = _groups(model, {"name": name, "lr": 1e-3, "weight_decay": 0.1})
    up = model.decoder.blocks[0].ffn.up.weight
    assert groups[id(up)]["lr"] == pytest.approx(1e-3 / 4)
    assert groups[id(up)]["weight_decay"] == pytest.approx(0.4)  # lr·wd as at the base width
    assert groups[id(model.tok_embed.weight)]["lr"] == pytest.approx(1e-3)


def test_sgd_follows_table_3():
    model = build(parametrization=MUP)
    groups = _groups(model, {"name": "sgd", "lr": 0.1})
    assert groups[id(model.decoder.blocks[0].ffn.up.weight)]["lr"] == pytest.approx(0.1)
    assert groups[id(model.tok_embed.weight)]["lr"] == pytest.approx(0.4)
    assert groups[id(model.decoder.blocks[0].ffn.up.bias)]["lr"] == pytest.approx(0.4)


@pytest.mark.parametrize(
    ("adjust", "hidden_lr"), [("match_rms_adamw", 1e-3 / 2), ("original", 1e-3)]
)
def test_muon_uses_the_spectral_scaling(adjust: str, hidden_lr: float):
    if not hasattr(torch.optim, "Muon"):
        pytest.skip("torch.optim.Muon needs PyTorch 2.9")
    model = build(parametrization=MUP)
    opt = optimizer_config({"name": "muon", "lr": 1e-3, "adjust_lr_fn": adjust}).build(
        model, torch.device("cpu")
    )
    groups = {id(p): g for g in opt.param_groups for p in g["params"]}
    assert groups[id(model.decoder.blocks[0].ffn.up.weight)]["lr"] == pytest.approx(hidden_lr)
    assert groups[id(model.tok_embed.weight)]["lr"] == pytest.approx(1e-3)  # AdamW's part: η
    loss = forward(model, torch.randint(0, 61, (2, 8)))
    loss.backward()
    opt.step()  # the grouped Muon steps
    sd = opt.state_dict()
    opt.load_state_dict(sd)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ({"parametrization": {"name": "mup", "base_d_model": 48}}, "base_d_model=48"),
        ({"parametrization": {"name": "mup", "base_d_model": 0}}, "base_d_model=0"),
        ({"parametrization": {"name": "mup", "base_d_model": 32}, "init": "xavier"}, "model/init"),
        ({"parametrization": MUP, "attention": "differential"}, "model/attention=differential"),
        ({"parametrization": MUP, "attn_scale": 1.0}, "model.attn_scale"),
        ({"parametrization": MUP, "scale_head": True}, "model.scale_head"),
        ({"parametrization": MUP, "scale_embeddings": True}, "model.scale_embeddings"),
        ({"parametrization": MUP, "norm_placement": "deepnorm"}, "model.norm_placement"),
        ({"parametrization": MUP, "d_ff": 514}, "model.d_ff"),
        ({"parametrization": {"name": "mup", "base_d_model": 2}}, "model.n_head"),
        ({"parametrization": {"name": "mup", "width": 2}}, "width"),
    ],
)
def test_mup_refuses_in_one_line_naming_the_key(override: dict, key: str):
    with pytest.raises(ConfigError) as e:
        ModelConfig.from_dict({**TINY, **override})
    assert key in str(e.value) and "\n" not in str(e.value)


def test_hydra_group_selects_mup():
    from hydra import compose, initialize_config_dir

    from tests.models.test_model_configs import CONF

    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose(
            config_name="inspect",
            overrides=[
                "model=tiny",
                "model/parametrization=mup",
                "model.parametrization.base_d_model=32",
            ],
        ).model
    assert dict(cfg.parametrization) == {"name": "mup", "base_d_model": 32}
    assert build_model(cfg).parametrization.width_mult == 2
