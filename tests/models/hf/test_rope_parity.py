"""Llama with each RoPE scaling type (transformers' ``rope_parameters``): the logits of a tiny random
LlamaForCausalLM equal ours loaded with ``from_hf`` (fp32, 1e-4) at a length beyond the original, the
config maps onto ``model.position.scaling``, and ``to_hf`` writes it back."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")
from src.errors import HFConversionError  # noqa: E402
from src.models import build_model  # noqa: E402
from src.models.hf import config_from_hf, from_hf, to_hf  # noqa: E402
from tests.models.hf.test_parity import ATOL, V, ids, load_exported, randomize  # noqa: E402

L0 = 16  # the original (training) length
ROPES = {  # rope_parameters beyond rope_theta -> our model.position.scaling
    "linear": ({"rope_type": "linear", "factor": 4.0}, {"name": "linear", "factor": 4.0}),
    "dynamic": ({"rope_type": "dynamic", "factor": 2.0}, {"name": "dynamic", "factor": 2.0}),
    "yarn": (
        {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": L0,
            "beta_fast": 16.0,
        },
        {"name": "yarn", "factor": 4.0, "original_max_seq_len": L0, "beta_fast": 16.0},
    ),
    "llama3": (
        {
            "rope_type": "llama3",
            "factor": 4.0,
            "original_max_position_embeddings": L0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
        },
        {
            "name": "llama3",
            "factor": 4.0,
            "original_max_seq_len": L0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
        },
    ),
}


def reference(kind: str) -> torch.nn.Module:
    """max_position_embeddings = the training length for dynamic (transformers scales from it), and
    factor × the original length for yarn / llama3 (as released configs are)."""
    torch.manual_seed(0)
    rope, _ = ROPES[kind]
    max_pos = L0 if kind in ("linear", "dynamic") else int(rope["factor"]) * L0
    cfg = transformers.LlamaConfig(
        vocab_size=V,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_pos,
        rope_parameters={"rope_theta": 500.0, **rope},
        bos_token_id=0,
        eos_token_id=1,
        tie_word_embeddings=False,
    )
    return randomize(transformers.LlamaForCausalLM(cfg), 9)


@pytest.mark.parametrize("kind", sorted(ROPES))
def test_scaled_rope_logits_match_transformers(kind: str, tmp_path: Path) -> None:
    ref = reference(kind)
    ref.save_pretrained(tmp_path / "ref")
    ours = from_hf(tmp_path / "ref")
    assert ours.config.position == {"name": "rope", "theta": 500.0, "scaling": ROPES[kind][1]}
    # 48 tokens: beyond the original length (dynamic scales at this length)
    src = ids(2, 3 * L0, seed=30)
    with torch.no_grad():
        expected, got = ref(src).logits, ours(src).logits
        unscaled = build_model(
            dataclasses.replace(ours.config, position={"name": "rope", "theta": 500.0})
        )
        unscaled.load_state_dict(ours.state_dict())  # the same weights, plain RoPE
        plain = unscaled.eval()(src).logits
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)
    assert (plain - expected).abs().max() > 100 * ATOL  # the scaling is what makes them agree
    back = load_exported("llama", to_hf(ours, tmp_path / "export"))
    assert back.config.rope_parameters == {**ROPES[kind][0], "rope_theta": 500.0}
    torch.testing.assert_close(back(src).logits, got, atol=ATOL, rtol=0)
    assert config_from_hf(back.config).position == ours.config.position


def test_dynamic_export_needs_its_original_length_at_max_seq_len() -> None:
    model = build_model(
        dict(
            family="decoder_only",
            vocab_size=V,
            d_model=32,
            n_layer=1,
            n_head=4,
            d_ff=64,
            max_seq_len=32,
            bias=False,
            tie_embeddings=False,
            norm={"name": "rmsnorm"},
            ffn={"name": "swiglu"},
            position={
                "name": "rope",
                "scaling": {"name": "dynamic", "factor": 2, "original_max_seq_len": 8},
            },
        )
    )
    with pytest.raises(
        HFConversionError, match=r"original_max_seq_len=8 \(transformers' dynamic rope scales from"
    ):
        to_hf(model, "/nonexistent")
