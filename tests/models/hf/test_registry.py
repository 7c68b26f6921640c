"""The format registry: exactly the nine formats, one file each, and an unknown model_type
that says what is supported and how to add a format."""

from __future__ import annotations

import dataclasses
import pkgutil

import pytest
import torch

from src.errors import ConfigError, HFConversionError
from src.models import build_model
from src.models.components.norms import NORMS
from src.models.config import ModelConfig
from src.models.hf import (
    ADAPTERS,
    ANY,
    Adapter,
    config_from_hf,
    convert_to_hf,
    export_adapter,
    formats,
    get_adapter,
)
from src.models.hf.architecture import GROUPS

FORMATS = ["bert", "gemma2", "gpt2", "llama", "mamba2", "marian", "mistral", "qwen3", "t5"]


def test_registry_lists_exactly_the_nine_formats() -> None:
    assert ADAPTERS.names() == FORMATS
    assert [get_adapter(t).family for t in FORMATS] == [
        "encoder_only",
        "decoder_only",
        "decoder_only",
        "decoder_only",
        "decoder_only",
        "encoder_decoder",
        "decoder_only",
        "decoder_only",
        "encoder_decoder",
    ]


def test_each_format_is_one_file_named_after_its_model_type() -> None:
    files = sorted(m.name for m in pkgutil.iter_modules(formats.__path__))
    assert files == FORMATS
    for t in FORMATS:
        cls = ADAPTERS.get(t)
        assert issubclass(cls, Adapter) and cls.__module__ == f"src.models.hf.formats.{t}"
        assert get_adapter(t).model_type == t


@pytest.mark.parametrize("model_type", ["mt5", None])
def test_unknown_model_type_lists_formats_and_how_to_add_one(model_type: str | None) -> None:
    name = model_type or "<model_type>"
    with pytest.raises(HFConversionError) as err:
        get_adapter(model_type)
    msg = str(err.value)
    assert (
        f"model_type {model_type!r} is not supported; supported: "
        "bert, gemma2, gpt2, llama, mamba2, marian, mistral, qwen3, t5" in msg
    )
    assert (
        f"src/models/hf/formats/{name}.py" in msg
        and f"@ADAPTERS.register({name!r})" in msg
        and "docs/hf.md" in msg
    )


def test_unknown_model_type_in_a_config_json_fails_before_transformers() -> None:
    with pytest.raises(
        HFConversionError, match=r"'mt5' is not supported.*src/models/hf/formats/mt5\.py"
    ):
        config_from_hf({"model_type": "mt5", "d_model": 32})


def test_a_model_type_cannot_be_registered_twice() -> None:
    with pytest.raises(ConfigError, match="hf format 'gpt2' is already registered by GPT2Adapter"):
        ADAPTERS.register("gpt2")(type("OtherGPT2", (Adapter,), {}))
    assert ADAPTERS.names() == FORMATS


def test_export_problems_name_each_key() -> None:
    """One architecture check serves every format: each difference is named by its config key."""
    c = ModelConfig(
        family="decoder_only",
        vocab_size=100,
        d_model=32,
        n_layer=1,
        n_head=4,
        n_kv_head=2,
        d_ff=64,
        max_seq_len=16,
        bias=False,
        scale_embeddings=True,
        mask={"name": "prefix_lm"},
        ffn={"name": "relu"},
    )
    assert get_adapter("gpt2").export_problems(c) == [
        "model/mask=prefix_lm (needs causal)",
        "model.bias=False (needs True)",
        "model.scale_embeddings=True (needs False)",
        "model.n_kv_head=2 (needs n_head: no GQA)",
    ]
    assert get_adapter("llama").export_problems(c) == [
        "model/position=learned (needs rope)",
        "model/norm=layernorm (needs rmsnorm)",
        "model/ffn=relu (needs swiglu)",
        "model/mask=prefix_lm (needs causal)",
        "model.scale_embeddings=True (needs False)",
    ]
    with pytest.raises(
        HFConversionError, match=r"gpt2: model/mask=prefix_lm.*; llama: model/position=learned"
    ):
        export_adapter(c)


def test_component_settings_are_checked_against_the_pattern_or_the_default() -> None:
    """A node key the pattern fixes must have that value; any other key set must be at its default."""
    llama = ModelConfig(
        family="decoder_only",
        vocab_size=100,
        d_model=32,
        n_layer=1,
        n_head=4,
        d_ff=64,
        max_seq_len=16,
        position={"name": "rope", "theta": 5e5, "rotary_fraction": 0.5},
        norm={"name": "rmsnorm"},
        ffn={"name": "swiglu"},
    )
    assert get_adapter("llama").export_problems(llama) == [
        "model.position.rotary_fraction=0.5 (needs 1.0)"
    ]
    bert = ModelConfig(
        family="encoder_only",
        vocab_size=100,
        d_model=32,
        n_layer=1,
        n_head=4,
        d_ff=64,
        max_seq_len=16,
        norm_placement="post",
        embedding_norm=True,
        ffn={"name": "gelu"},
    )
    assert get_adapter("bert").export_problems(bert) == [
        "model.ffn.approximate='tanh' (needs 'none')"
    ]
    marian = ModelConfig(
        family="encoder_decoder",
        vocab_size=100,
        d_model=32,
        n_layer=1,
        n_head=4,
        d_ff=64,
        max_seq_len=16,
        norm_placement="post",
        position={"name": "sinusoidal"},
        ffn={"name": "silu"},
        norm={"name": "layernorm", "eps": 1e-6},
        scale_embeddings=True,
    )
    assert get_adapter("marian").export_problems(marian) == [
        "model.position.layout='interleaved' (needs 'concat')",
        "model.norm.eps=1e-06 (needs 1e-05)",
    ]


@dataclasses.dataclass
class GrownConfig(ModelConfig):
    """ModelConfig with a key added after the formats were written (as issue 13's qk_norm)."""

    qk_norm: str = "none"


def test_a_config_key_no_format_knows_fails_closed() -> None:
    """A key the formats do not know is refused unless at its default, until a format says it holds it."""
    c = dict(
        family="decoder_only",
        vocab_size=100,
        d_model=32,
        n_layer=1,
        n_head=4,
        d_ff=64,
        max_seq_len=16,
    )
    gpt2 = get_adapter("gpt2")
    assert gpt2.export_problems(GrownConfig(**c)) == []
    assert gpt2.export_problems(GrownConfig(**c, qk_norm="rmsnorm")) == [
        "model.qk_norm='rmsnorm' (this format has no field for it; needs 'none')"
    ]
    holds = dataclasses.replace(gpt2.arch, more={"qk_norm": ANY})
    assert holds.problems(GrownConfig(**c, qk_norm="rmsnorm")) == []
    assert dataclasses.replace(gpt2.arch, more={"qk_norm": "layernorm"}).problems(
        GrownConfig(**c, qk_norm="rmsnorm")
    ) == ["model.qk_norm='rmsnorm' (needs 'layernorm')"]


@dataclasses.dataclass
class GrownNodeConfig(ModelConfig):
    """ModelConfig with a component group added later (a norm node on queries and keys)."""

    qk_norm: dict | None = None


def test_a_later_component_group_takes_a_node_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(GROUPS, "qk_norm", NORMS)
    c = dict(
        family="decoder_only",
        vocab_size=100,
        d_model=32,
        n_layer=1,
        n_head=4,
        d_ff=64,
        max_seq_len=16,
    )
    gpt2 = get_adapter("gpt2")
    assert gpt2.export_problems(GrownNodeConfig(**c, qk_norm={"name": "rmsnorm"})) == [
        "model.qk_norm={'name': 'rmsnorm'} (this format has no field for it; needs None)"
    ]
    holds = dataclasses.replace(gpt2.arch, more={"qk_norm": {"name": "rmsnorm", "eps": ANY}})
    assert holds.problems(GrownNodeConfig(**c, qk_norm={"name": "rmsnorm", "eps": 1e-5})) == []
    assert holds.problems(GrownNodeConfig(**c, qk_norm={"name": "layernorm"})) == [
        "model/qk_norm=layernorm (needs rmsnorm)"
    ]
    assert holds.problems(GrownNodeConfig(**c)) == ["model/qk_norm=None (needs rmsnorm)"]


def test_export_refuses_a_tensor_no_rule_writes() -> None:
    """Strict on export too: a weight of ours that no rule writes is an error, never a silent loss."""
    model = build_model(
        dict(
            family="decoder_only",
            vocab_size=100,
            d_model=32,
            n_layer=1,
            n_head=4,
            d_ff=64,
            max_seq_len=16,
        )
    )
    adapter = export_adapter(model.config)
    hf_config = adapter.hf_config(model.config)
    state = model.state_dict()
    # the tied head is written once
    assert len(convert_to_hf(state, model.config, adapter, hf_config)) == len(state) - 1
    extra = {**state, "decoder.blocks.0.attn.q_norm.weight": torch.ones(8)}
    lost = r"our tensors \['decoder.blocks.0.attn.q_norm.weight'\] have no rule in the gpt2 adapter"
    with pytest.raises(HFConversionError, match=lost):
        convert_to_hf(extra, model.config, adapter, hf_config)
