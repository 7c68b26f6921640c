"""model/init: the registered weight-initialisation schemes (src/models/components/init.py)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from src.errors import ConfigError
from src.models import ModelConfig, build_model
from tests.run_fixtures import compose  # noqa: F401  (pytest fixture: the composed train config)

TINY = dict(vocab_size=61, d_model=32, n_layer=2, n_head=4, d_ff=64, max_seq_len=16)


def build(**kw) -> nn.Module:
    torch.manual_seed(0)
    return build_model(ModelConfig.from_dict({**TINY, **kw}))


def test_default_is_gpt2_and_residual_projections_are_scaled():
    model = build()
    assert model.config.init == {"name": "gpt2"}
    weights = dict(model.named_parameters())
    down = [w for n, w in weights.items() if n.endswith("ffn.down.weight")]
    up = [w for n, w in weights.items() if n.endswith("ffn.up.weight")]
    assert down and up
    # 4 residual branches (2 blocks x 2): std 0.02 / sqrt(4) = 0.01 on the output projections
    assert torch.cat([w.flatten() for w in down]).std().item() == pytest.approx(0.01, rel=0.15)
    assert torch.cat([w.flatten() for w in up]).std().item() == pytest.approx(0.02, rel=0.15)


def test_explicit_gpt2_equals_default_bit_for_bit():
    a, b = build(), build(init={"name": "gpt2"})
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p, q), n


def test_xavier_bounds_and_embedding_std():
    model = build(init="xavier", tie_embeddings=False)
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            fan_out, fan_in = module.weight.shape
            bound = math.sqrt(6.0 / (fan_in + fan_out))
            assert module.weight.abs().max().item() <= bound + 1e-6, name
            # uniform over the whole range
            assert module.weight.abs().max().item() > 0.8 * bound, name
            if module.bias is not None:
                assert torch.count_nonzero(module.bias) == 0, name
    emb = model.tok_embed.weight
    assert emb.std().item() == pytest.approx(32**-0.5, rel=0.1)
    # no residual scaling: the output projections have the same Xavier bound as their shape says
    gpt2 = build()
    x_down = [m for n, m in model.named_modules() if n.endswith("ffn.down")][0].weight.std().item()
    g_down = [m for n, m in gpt2.named_modules() if n.endswith("ffn.down")][0].weight.std().item()
    assert x_down > 5 * g_down


def test_placement_adjusts_after_the_scheme():
    # ReZero's gate starts at zero whatever the scheme (the placement's own init_sublayer runs after)
    model = build(init="xavier", norm_placement="rezero")
    gates = [p for n, p in model.named_parameters() if "alpha" in n or "gate" in n]
    assert gates and all(torch.count_nonzero(g) == 0 for g in gates)


def test_unknown_scheme_and_bad_std_fail_naming_the_key():
    with pytest.raises(ConfigError, match="gpt2.*xavier|xavier.*gpt2"):
        ModelConfig.from_dict({**TINY, "init": {"name": "kaiming"}})
    with pytest.raises(ConfigError, match="model.init_std"):
        ModelConfig.from_dict({**TINY, "init_std": -1.0})


def test_hydra_group_selects_the_scheme(compose):
    cfg = compose("model=tiny", "model/init=xavier")
    assert cfg.model.init.name == "xavier"
    assert ModelConfig.from_dict(dict(cfg.model)).init == {"name": "xavier"}
