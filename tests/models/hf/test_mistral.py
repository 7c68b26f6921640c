"""Mistral (Llama plus a sliding window): a tiny random MistralForCausalLM built here (offline),
loaded with ``from_hf``, gives transformers' logits (fp32, 1e-4) on sequences longer than the
window, with the window mapped onto ``model/mask=sliding_window``; ``to_hf`` writes it back and
the exported model gives the same logits and, loaded again, the same state dict."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")
from src.errors import HFConversionError  # noqa: E402
from src.models import build_model  # noqa: E402
from src.models.generation import generate  # noqa: E402
from src.models.hf import config_from_hf, export_adapter, from_hf, to_hf  # noqa: E402
from tests.models.hf.test_parity import ATOL, V, greedy_reference, ids, randomize  # noqa: E402

W = 5  # the window: every sequence below is longer


def reference(window: int | None, attn: str = "eager") -> torch.nn.Module:
    """GQA (4 query heads, 2 K/V heads), head_dim 16 × 4 != hidden 32, untied head."""
    torch.manual_seed(0)
    cfg = transformers.MistralConfig(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 5000.0},
        rms_norm_eps=1e-5,
        sliding_window=window,
        bos_token_id=0,
        eos_token_id=1,
        tie_word_embeddings=False,
    )
    cfg._attn_implementation = attn
    return randomize(transformers.MistralForCausalLM(cfg), 11)


def run(model: torch.nn.Module, src: torch.Tensor, mask: torch.Tensor | None = None):
    with torch.no_grad():
        return model(input_ids=src, attention_mask=mask).logits


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[torch.nn.Module, torch.nn.Module]:
    ref = reference(W)
    folder = tmp_path_factory.mktemp("mistral")
    ref.save_pretrained(folder)
    return ref, from_hf(folder)


def test_config_maps_the_window_onto_the_sliding_window_mask(pair) -> None:
    c = pair[1].config
    assert c.mask == {"name": "sliding_window", "window": W}
    assert (c.n_head, c.n_kv_head, c.d_head, c.bias, c.tie_embeddings) == (4, 2, 16, False, False)
    assert c.position == {"name": "rope", "theta": 5000.0} and c.ffn == {"name": "swiglu"}
    # sliding_window: null (Mistral v0.2 and later) is the causal mask
    assert config_from_hf(reference(None).config).mask == {"name": "causal"}


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_logits_match_transformers_beyond_the_window(pair, attn: str) -> None:
    ref, ours = pair
    ref.config._attn_implementation = attn
    src = ids(2, 4 * W + 3, seed=40)  # 23 tokens: the window cuts off most keys
    try:
        expected = run(ref, src)
    finally:
        ref.config._attn_implementation = "eager"
    torch.testing.assert_close(run(ours, src), expected, atol=ATOL, rtol=0)
    # the window matters at this length: the causal model differs by far more than the tolerance
    causal = build_model(dataclasses.replace(ours.config, mask={"name": "causal"})).eval()
    causal.load_state_dict(ours.state_dict())
    assert (run(causal, src) - expected)[:, W:].abs().max() > 100 * ATOL
    assert torch.allclose(run(causal, src)[:, :W], expected[:, :W], atol=ATOL, rtol=0)


def test_padded_logits_match_transformers(pair) -> None:
    """Right padding, and left padding that moves the window's start past the pads."""
    ref, ours = pair
    src, mask = ids(2, 3 * W, seed=41), torch.ones(2, 3 * W, dtype=torch.long)
    mask[0, 11:] = 0
    mask[1, :3] = 0
    real = mask.bool()
    torch.testing.assert_close(
        run(ours, src, mask)[real], run(ref, src, mask)[real], atol=ATOL, rtol=0
    )


def test_greedy_generation_past_the_window(pair) -> None:
    """Our rolling cache of the last window keys against transformers' cached greedy search."""
    ref, ours = pair
    prompt = ids(2, W + 2, seed=44)
    expected = greedy_reference(ref, prompt, torch.ones_like(prompt), 3 * W)
    got = generate(ours, prompt, 3 * W)
    assert got.tolist() == expected.tolist()
    assert len(set(got[:, W + 2 :].flatten().tolist())) > 3, "degenerate reference"


def test_round_trip(pair, tmp_path: Path) -> None:
    ref, ours = pair
    out = to_hf(ours, tmp_path / "export")
    assert export_adapter(ours.config).model_type == "mistral"
    back, info = transformers.AutoModelForCausalLM.from_pretrained(out, output_loading_info=True)
    assert not any(info.values()), info
    assert type(back) is transformers.MistralForCausalLM and back.config.sliding_window == W
    back.config._attn_implementation = "eager"
    src = ids(2, 4 * W, seed=42)
    torch.testing.assert_close(run(back.eval(), src), run(ours, src), atol=ATOL, rtol=0)
    again = from_hf(out)
    assert again.config.to_dict() == {**ours.config.to_dict(), "name": "export"}
    mine, theirs = ours.state_dict(), again.state_dict()
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)


def test_causal_mistral_round_trips_with_a_null_window(tmp_path: Path) -> None:
    ref = reference(None)
    ref.save_pretrained(tmp_path / "ref")
    ours = from_hf(tmp_path / "ref")
    back = transformers.AutoModelForCausalLM.from_pretrained(
        to_hf(ours, tmp_path / "out", model_type="mistral")
    ).eval()
    assert type(back) is transformers.MistralForCausalLM and back.config.sliding_window is None
    src = ids(2, 4 * W, seed=43)
    torch.testing.assert_close(run(back, src), run(ref, src), atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"mask": {"name": "prefix_lm"}}, "model/mask=prefix_lm"),
        ({"layer_masks": ["sliding_window", "causal"]}, "model.layer_masks"),
        ({"attn_softcap": 50.0}, "model.attn_softcap"),
        ({"bias": True}, "model.bias=True"),
    ],
)
def test_export_refuses_what_mistral_cannot_hold(pair, change, match, tmp_path: Path) -> None:
    cfg = dataclasses.replace(pair[1].config, **change)
    with pytest.raises(HFConversionError, match=match):
        to_hf(build_model(cfg), tmp_path, model_type="mistral")
