"""Fail loudly: unknown component names list what is registered; unknown keys list what is accepted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from src.errors import ConfigError
from src.models import ModelConfig, build_model
from src.registry import Registry

MakeConfig = Callable[..., dict[str, Any]]


@pytest.mark.parametrize(
    ("group", "bad", "registry"),
    [
        ("position", "rotary", "POSITIONS"),
        ("norm", "batchnorm", "NORMS"),
        ("ffn", "reglu", "FFNS"),
        ("qk_norm", "batchnorm", "QK_NORMS"),
        ("mask", "sliding", "MASKS"),
    ],
)
def test_unknown_component_name_lists_registered(
    make_tiny_config: MakeConfig, group: str, bad: str, registry: str
) -> None:
    """The message lists what the registry holds (read from it: a variant added the README's way
    keeps this green)."""
    import src.models.components as components

    reg = getattr(components, registry)
    listed = ", ".join(reg.names())
    assert bad not in reg.names()
    with pytest.raises(ConfigError) as e:
        build_model(make_tiny_config(**{group: {"name": bad}}))
    assert f"unknown {group} '{bad}'" in str(e.value)
    assert f"registered {group}s: {listed}" in str(e.value)


def test_unknown_family_and_placement(make_tiny_config: MakeConfig) -> None:
    with pytest.raises(ConfigError) as family:
        build_model(make_tiny_config(family="decoder"))
    assert "model.family='decoder' is not known" in str(family.value)  # the key, the value
    # the fix
    assert all(
        name in str(family.value) for name in ("decoder_only", "encoder_only", "encoder_decoder")
    )
    with pytest.raises(ConfigError) as placement:
        build_model(make_tiny_config(norm_placement="peri"))
    assert "model.norm_placement='peri' is not known" in str(placement.value)
    assert all(
        f"'{name}'" in str(placement.value)
        for name in ("pre", "post", "sandwich", "deepnorm", "rezero")
    )


def test_unknown_top_level_key(make_tiny_config: MakeConfig) -> None:
    with pytest.raises(
        ConfigError,
        match=r"model.n_layers=2 is not a key of model \(did you mean model.n_layer\b.*\?\) "
        r"\(accepted: .*n_layer",
    ):
        build_model(make_tiny_config(n_layers=2))


@pytest.mark.parametrize(
    ("group", "node", "accepts"),
    [
        ("position", {"name": "rope", "base": 500.0}, "theta, rotary_fraction, scaling"),
        ("position", {"name": "t5_bias", "buckets": 8}, "causal, num_buckets, max_distance"),
        ("qk_norm", {"name": "rmsnorm", "axis": "head"}, "eps, scope"),
        ("norm", {"name": "rmsnorm", "bias": False}, "eps"),
        ("ffn", {"name": "gelu", "approx": "tanh"}, "approximate"),
        ("position", {"name": "learned", "size": 8}, "no keys"),
    ],
)
def test_unknown_component_key(
    make_tiny_config: MakeConfig, group: str, node: dict, accepts: str
) -> None:
    bad = next(k for k in node if k != "name")
    with pytest.raises(
        ConfigError,
        match=rf"model\.{group}\.{bad}=.* is not a key of model/{group}={node['name']}.* "
        rf"\(accepted: {accepts}\); fix the spelling",
    ):
        build_model(make_tiny_config(**{group: node}))


def test_component_config_without_name(make_tiny_config: MakeConfig) -> None:
    with pytest.raises(ConfigError, match="position config needs a 'name' key"):
        build_model(make_tiny_config(position={"theta": 1.0}))


def test_invalid_sizes_explain_the_fix(make_tiny_config: MakeConfig) -> None:
    with pytest.raises(ConfigError, match="d_model=32 is not divisible by model.n_head=5"):
        build_model(make_tiny_config(n_head=5))
    with pytest.raises(ConfigError, match="n_head=4 is not divisible by model.n_kv_head=3"):
        build_model(make_tiny_config(n_kv_head=3))
    with pytest.raises(ConfigError, match="rope needs an even head dimension"):
        ModelConfig.from_dict(make_tiny_config(d_model=36, n_head=4, position={"name": "rope"}))
    with pytest.raises(
        ConfigError, match="model/mask=prefix_lm is for decoder_only / encoder_only"
    ):
        build_model(make_tiny_config(family="encoder_decoder", mask={"name": "prefix_lm"}))
    with pytest.raises(ConfigError, match=r"model.d_head=0 must be a positive integer"):
        build_model(make_tiny_config(d_head=0))
    with pytest.raises(ConfigError, match=r"model.attn_scale=-1.0 must be a positive number"):
        build_model(make_tiny_config(attn_scale=-1.0))


def test_head_dim_need_not_split_d_model(make_tiny_config: MakeConfig) -> None:
    """T5's d_kv × heads may differ from d_model: with model.d_head the projections are [C -> H·d_head]."""
    model = build_model(
        make_tiny_config(d_model=30, n_head=4, d_head=12, n_kv_head=2, position={"name": "rope"})
    )
    attn = model.decoder.blocks[0].attn
    assert attn.qkv.weight.shape == (4 * 12 + 2 * 2 * 12, 30) and attn.out.weight.shape == (30, 48)
    assert model(torch.randint(0, 97, (2, 5))).logits.shape == (2, 5, 97)


def test_registry_refuses_a_second_class_under_one_name() -> None:
    reg: Registry[object] = Registry("widget")

    @reg.register("a")
    class A:
        pass

    with pytest.raises(ConfigError, match="widget 'a' is already registered by"):

        @reg.register("a")
        class B:
            pass

    assert reg.names() == ["a"] and reg.get("a") is A


@pytest.mark.parametrize("ffn", ["gelu", "geglu"])
def test_gelu_form_is_checked_before_building(make_tiny_config: MakeConfig, ffn: str) -> None:
    """Both GELU-based FFNs share one check, run by the config's validation (nothing built yet)."""
    with pytest.raises(
        ConfigError, match=r"model.ffn.approximate='fast' is not known; use 'tanh' .* or 'none'"
    ):
        ModelConfig.from_dict(make_tiny_config(ffn={"name": ffn, "approximate": "fast"}))
