"""Mamba-2 from and to Hugging Face format: a tiny random ``Mamba2ForCausalLM`` built here
(offline), loaded with ``from_hf``, gives transformers' own torch-path logits (``use_cache=False``,
float32, 1e-4) on sequences longer than its chunk; ``to_hf`` writes it back, transformers loads the
export with no key left over and gives the same logits, and loading the export again gives the same
config and tensors. Configs the format cannot hold are refused in one line naming the key."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")
from src.errors import HFConversionError  # noqa: E402
from src.models import build_model  # noqa: E402
from src.models.config import ModelConfig  # noqa: E402
from src.models.generation import generate  # noqa: E402
from src.models.hf import config_from_hf, export_adapter, from_hf, to_hf  # noqa: E402
from src.models.hf.folders import decode_float_tags  # noqa: E402
from tests.conftest import tiny_model_dict  # noqa: E402
from tests.models.hf.test_parity import ATOL, V, greedy_reference, ids, randomize  # noqa: E402

CHUNK = 8  # every sequence below is longer, and not a multiple of it


def reference(n_groups: int = 2, tied: bool = False, **overrides) -> torch.nn.Module:
    """hidden 32, E = 64 = 8 heads × 8, state 16, 2 layers."""
    torch.manual_seed(0)
    cfg = transformers.Mamba2Config(
        **{
            "vocab_size": V,
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_heads": 8,
            "head_dim": 8,
            "state_size": 16,
            "expand": 2,
            "conv_kernel": 4,
            "n_groups": n_groups,
            "chunk_size": CHUNK,
            "bos_token_id": 0,
            "eos_token_id": 1,
            "pad_token_id": None,
            "tie_word_embeddings": tied,
            **overrides,
        }
    )
    model = randomize(transformers.Mamba2ForCausalLM(cfg), 5 + n_groups)
    with torch.no_grad():  # A = −exp(A_log) in −[1, 8]: decays that matter over a chunk
        for layer in model.backbone.layers:
            layer.mixer.A_log.copy_(torch.linspace(0, 2, 8))
    return model.eval()


def run(model: torch.nn.Module, src: torch.Tensor) -> torch.Tensor:
    """Logits [B, T, V]; transformers' torch path without its cache (the chunked scan)."""
    hf = isinstance(model, transformers.PreTrainedModel)
    with torch.no_grad():
        return model(input_ids=src, **({"use_cache": False} if hf else {})).logits


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[torch.nn.Module, torch.nn.Module]:
    ref = reference()
    folder = tmp_path_factory.mktemp("mamba2")
    ref.save_pretrained(folder)  # time_step_limit (0, inf) is written as a __float__ tag
    return ref, from_hf(folder)


def test_config_maps_onto_the_mamba2_mixer_without_ffn(pair) -> None:
    c = pair[1].config
    assert c.mixer == {
        "name": "mamba2",
        "d_state": 16,
        "d_conv": 4,
        "expand": 2,
        "n_groups": 2,
        "chunk_size": CHUNK,
        "head_dim": 8,
    }
    assert (c.ffn, c.position, c.norm) == (
        {"name": "none"},
        {"name": "none"},
        {"name": "rmsnorm", "eps": 1e-5},
    )
    assert (c.n_head, c.norm_placement, c.tie_embeddings) == (8, "pre", False)
    block = pair[1].decoder.blocks[0]
    assert block.attn.n_heads == 8 and not hasattr(block, "ffn_norm")


@pytest.mark.parametrize("n_groups, tied", [(1, True), (2, False)])
def test_logits_match_transformers_beyond_a_chunk(n_groups: int, tied: bool, tmp_path) -> None:
    ref = reference(n_groups, tied)
    ref.save_pretrained(tmp_path)
    ours = from_hf(tmp_path)
    assert ours.config.tie_embeddings is tied
    src = ids(2, 3 * CHUNK + 5, seed=60)  # 29 tokens: 4 chunks, the last partial
    expected = run(ref, src)
    torch.testing.assert_close(run(ours, src), expected, atol=ATOL, rtol=0)
    # the sequence matters: the last position's logits differ from those of the last token alone
    assert (expected[:, -1] - run(ref, src[:, -1:])[:, -1]).abs().max() > 100 * ATOL


def test_greedy_generation_with_the_state_cache(pair) -> None:
    """Our per-layer state cache against transformers' cached greedy search."""
    ref, ours = pair
    prompt = ids(2, CHUNK + 3, seed=61)
    expected = greedy_reference(ref, prompt, torch.ones_like(prompt), 12)
    got = generate(ours, prompt, 12)
    assert got.tolist() == expected.tolist()


def test_round_trip(pair, tmp_path: Path) -> None:
    ref, ours = pair
    out = to_hf(ours, tmp_path / "export")
    assert export_adapter(ours.config).model_type == "mamba2"
    back, info = transformers.AutoModelForCausalLM.from_pretrained(out, output_loading_info=True)
    assert not any(info.values()), info
    assert type(back) is transformers.Mamba2ForCausalLM
    assert (back.config.num_heads, back.config.head_dim, back.config.n_groups) == (8, 8, 2)
    src = ids(2, 2 * CHUNK + 3, seed=62)
    torch.testing.assert_close(run(back.eval(), src), run(ours, src), atol=ATOL, rtol=0)
    theirs_in, theirs_out = ref.state_dict(), back.state_dict()
    assert all(torch.equal(theirs_in[k], theirs_out[k]) for k in theirs_in)
    again = from_hf(out)
    assert again.config.to_dict() == {**ours.config.to_dict(), "name": "export"}
    mine, loaded = ours.state_dict(), again.state_dict()
    assert mine.keys() == loaded.keys()
    assert all(torch.equal(mine[k], loaded[k]) for k in mine)


def our_mamba2(**mixer) -> ModelConfig:
    """A config of ours (not imported): the mixer node as a user writes it."""
    return ModelConfig.from_dict(
        tiny_model_dict(
            n_head=4,
            position={"name": "none"},
            norm={"name": "rmsnorm", "eps": 1e-5},
            ffn={"name": "none"},
            mixer={"name": "mamba2", "d_state": 8, "chunk_size": 4, **mixer},
            bias=False,
        )
    )


@pytest.mark.parametrize("mixer", [{}, {"head_dim": 16, "n_groups": 2}])
def test_our_own_config_exports_with_the_heads_it_builds(mixer, tmp_path: Path) -> None:
    torch.manual_seed(3)
    ours = build_model(our_mamba2(**mixer)).eval()
    block = ours.decoder.blocks[0].attn
    back = transformers.AutoModelForCausalLM.from_pretrained(to_hf(ours, tmp_path)).eval()
    assert (back.config.num_heads, back.config.head_dim) == (block.n_heads, block.head_dim)
    assert back.config.tie_word_embeddings is True
    src = ids(2, 11, seed=63)
    torch.testing.assert_close(run(back, src), run(ours, src), atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"hidden_act": "gelu"}, "hidden_act='gelu'"),
        ({"use_bias": True}, "use_bias=True"),
        ({"use_conv_bias": False}, "use_conv_bias=False"),
        ({"time_step_limit": (0.0, 10.0)}, r"time_step_limit=\(0.0, 10.0\)"),
        ({"layer_norm_epsilon": 1e-6}, "layer_norm_epsilon=1e-06"),
    ],
)
def test_import_refuses_what_our_layer_cannot_reproduce(change, match) -> None:
    cfg = transformers.Mamba2Config(hidden_size=32, num_heads=8, head_dim=8, **change)
    with pytest.raises(HFConversionError, match=f"model_type 'mamba2': {match}") as e:
        config_from_hf(cfg)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"ffn": {"name": "swiglu"}}, "model/ffn=swiglu"),
        ({"position": {"name": "learned"}}, "model/position=learned"),
        ({"norm": {"name": "rmsnorm", "eps": 1e-6}}, "model.norm.eps=1e-06"),
        ({"dropout": 0.1}, "model.dropout=0.1"),
        ({"mixer": {"name": "short_conv"}}, "model/mixer=short_conv"),
        ({"layer_mixers": ["mamba2", "attention"]}, "model.layer_mixers"),
    ],
)
def test_export_refuses_what_mamba2_cannot_hold(change, match, tmp_path: Path) -> None:
    cfg = dataclasses.replace(our_mamba2(), **change)
    with pytest.raises(HFConversionError, match=match) as e:
        to_hf(build_model(cfg), tmp_path, model_type="mamba2")
    assert "\n" not in str(e.value)


def test_float_tags_of_transformers_config_json_decode() -> None:
    tagged = {"time_step_limit": [0.0, {"__float__": "Infinity"}], "x": {"__float__": "other"}}
    assert decode_float_tags(tagged) == {
        "time_step_limit": [0.0, float("inf")],
        "x": {"__float__": "other"},
    }
