"""Gemma 2: a tiny random Gemma2ForCausalLM built here (offline), loaded with ``from_hf``, gives
transformers' logits (fp32, 1e-4) on sequences longer than the window: alternating local and
global layers (``model.layer_masks``), both soft-caps, the sandwich of (1 + w) RMSNorms, the
``query_pre_attn_scalar`` scale, √d embeddings and tanh GeGLU; ``to_hf`` writes it back, the
exported model gives the same logits and, loaded again, the same state dict."""

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

W = 5  # the window of the local layers: every sequence below is longer


def reference(**changes) -> torch.nn.Module:
    """3 layers (local, global, local), GQA, head_dim 16 × 4 != hidden 32, a scalar of 24 (not
    head_dim), caps low enough to bend the random scores and logits, untied head."""
    torch.manual_seed(0)
    kwargs = dict(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 5000.0},
        rms_norm_eps=1e-5,
        query_pre_attn_scalar=24,
        sliding_window=W,
        attn_logit_softcapping=3.0,
        final_logit_softcapping=2.0,
        pad_token_id=0,
        bos_token_id=2,
        eos_token_id=1,
        tie_word_embeddings=False,
    )
    cfg = transformers.Gemma2Config(**{**kwargs, **changes})
    cfg._attn_implementation = "eager"
    return randomize(transformers.Gemma2ForCausalLM(cfg), 12)


def run(model: torch.nn.Module, src: torch.Tensor, mask: torch.Tensor | None = None):
    with torch.no_grad():
        return model(input_ids=src, attention_mask=mask).logits


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[torch.nn.Module, torch.nn.Module]:
    ref = reference()
    folder = tmp_path_factory.mktemp("gemma2")
    ref.save_pretrained(folder)
    return ref, from_hf(folder)


def test_config_maps_onto_our_keys(pair) -> None:
    c = pair[1].config
    assert c.mask == {"name": "sliding_window", "window": W}
    assert c.layer_masks == ["sliding_window", "causal"]
    assert (c.attn_softcap, c.final_softcap, c.attn_scale) == (3.0, 2.0, 24**-0.5)
    assert (c.norm_placement, c.norm, c.ffn) == (
        "sandwich",
        {"name": "gemma_rmsnorm", "eps": 1e-5},
        {"name": "geglu", "approximate": "tanh"},
    )
    assert c.scale_embeddings and not c.bias and (c.n_kv_head, c.d_head) == (2, 16)


def test_logits_match_transformers_beyond_the_window(pair) -> None:
    """transformers' eager attention: its sdpa refuses softcap (ValueError)."""
    ref, ours = pair
    src = ids(2, 4 * W + 3, seed=50)  # 23 tokens
    expected = run(ref, src)
    torch.testing.assert_close(run(ours, src), expected, atol=ATOL, rtol=0)
    assert expected.abs().max() <= 2.0  # the final cap holds
    # each mapped feature matters at this length: without it the logits differ by far more
    for change in (
        {"layer_masks": None},  # every layer local
        {"mask": {"name": "causal"}, "layer_masks": None},  # every layer global
        {"attn_softcap": None},
        {"attn_scale": None},
        {"final_softcap": None},
    ):
        other = build_model(dataclasses.replace(ours.config, **change)).eval()
        other.load_state_dict(ours.state_dict())
        assert (run(other, src) - expected).abs().max() > 100 * ATOL, change


def test_padded_logits_match_transformers(pair) -> None:
    ref, ours = pair
    src, mask = ids(2, 3 * W, seed=51), torch.ones(2, 3 * W, dtype=torch.long)
    mask[0, 11:] = 0
    mask[1, :3] = 0
    real = mask.bool()
    got, expected = run(ours, src, mask)[real], run(ref, src, mask)[real]
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)


def test_greedy_generation_past_the_window(pair) -> None:
    """Our rolling cache in the local layers against transformers' cached greedy search."""
    ref, ours = pair
    prompt = ids(2, W + 2, seed=52)
    expected = greedy_reference(ref, prompt, torch.ones_like(prompt), 3 * W)
    got = generate(ours, prompt, 3 * W)
    assert got.tolist() == expected.tolist()
    assert len(set(got[:, W + 2 :].flatten().tolist())) > 3, "degenerate reference"


def test_round_trip(pair, tmp_path: Path) -> None:
    ref, ours = pair
    out = to_hf(ours, tmp_path / "export")
    assert export_adapter(ours.config).model_type == "gemma2"
    back, info = transformers.AutoModelForCausalLM.from_pretrained(out, output_loading_info=True)
    assert not any(info.values()), info
    assert type(back) is transformers.Gemma2ForCausalLM
    assert back.config.layer_types == ref.config.layer_types
    assert back.config.query_pre_attn_scalar == 24 and back.config.sliding_window == W
    back.config._attn_implementation = "eager"
    src = ids(2, 4 * W, seed=53)
    torch.testing.assert_close(run(back.eval(), src), run(ref, src), atol=ATOL, rtol=0)
    again = from_hf(out)
    assert again.config.to_dict() == {**ours.config.to_dict(), "name": "export"}
    mine, theirs = ours.state_dict(), again.state_dict()
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)


def test_tied_uncapped_all_global_round_trip(tmp_path: Path) -> None:
    """The released models' tied head, no caps, every layer global (no layer_masks)."""
    ref = reference(
        tie_word_embeddings=True,
        attn_logit_softcapping=None,
        final_logit_softcapping=None,
        query_pre_attn_scalar=16,
        layer_types=["full_attention"] * 3,
    )
    ref.save_pretrained(tmp_path / "ref")
    ours = from_hf(tmp_path / "ref")
    c = ours.config
    assert (c.mask, c.layer_masks, c.attn_scale, c.attn_softcap) == (
        {"name": "causal"},
        None,
        None,
        None,
    )
    src = ids(2, 4 * W, seed=54)
    torch.testing.assert_close(run(ours, src), run(ref, src), atol=ATOL, rtol=0)
    back = transformers.AutoModelForCausalLM.from_pretrained(to_hf(ours, tmp_path / "out"))
    assert back.config.layer_types == ["full_attention"] * 3 and back.config.tie_word_embeddings
    torch.testing.assert_close(run(back.eval(), src), run(ref, src), atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"mask": {"name": "prefix_lm"}, "layer_masks": None}, "model/mask=prefix_lm"),
        ({"norm": {"name": "rmsnorm", "eps": 1e-5}}, "model/norm=rmsnorm"),
        ({"norm_placement": "pre"}, "model.norm_placement='pre'"),
        ({"scale_embeddings": False}, "model.scale_embeddings=False"),
    ],
)
def test_export_refuses_what_gemma2_cannot_hold(pair, change, match, tmp_path: Path) -> None:
    cfg = dataclasses.replace(pair[1].config, **change)
    with pytest.raises(HFConversionError, match=match):
        to_hf(build_model(cfg), tmp_path, model_type="gemma2")


def test_import_refuses_what_we_cannot_reproduce() -> None:
    with pytest.raises(HFConversionError, match="gemma2.*hidden_activation='silu'"):
        config_from_hf(reference(hidden_activation="silu").config)
    with pytest.raises(HFConversionError, match="gemma2.*attention_bias=True"):
        config_from_hf(reference(attention_bias=True).config)
