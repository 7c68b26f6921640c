"""Sliding-window attention (``model/mask=sliding_window``), per-layer masks (``model.layer_masks``)
and the rolling KV cache of a local layer (issue 59)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from src.models import build_model
from src.models.components.block import build_bias
from src.models.components.flops import attention_score_flops
from src.models.components.masks import MASKS
from src.models.config import ModelConfig
from src.models.generation import generate
from tests.conftest import tiny_model_dict

W = 4


def windowed(**overrides: Any) -> dict[str, Any]:
    return tiny_model_dict(mask={"name": "sliding_window", "window": W}, **overrides)


def test_each_query_sees_the_last_window_keys() -> None:
    pos = torch.arange(10)
    allowed = MASKS.build({"name": "sliding_window", "window": 3}).allowed(pos, pos)[0]  # [T, S]
    for i in range(10):
        assert allowed[i].nonzero().flatten().tolist() == list(range(max(0, i - 2), i + 1))


def test_window_at_least_the_length_is_the_causal_mask() -> None:
    torch.manual_seed(0)
    causal = build_model(tiny_model_dict()).eval()
    sw = build_model(tiny_model_dict(mask={"name": "sliding_window", "window": 32})).eval()
    sw.load_state_dict(causal.state_dict())
    ids = torch.randint(0, 97, (2, 20))
    with torch.no_grad():
        torch.testing.assert_close(sw(ids).logits, causal(ids).logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("position", ["learned", "rope", "alibi"])
def test_output_does_not_depend_on_tokens_beyond_the_reach(position: str) -> None:
    """One windowed layer: position t depends only on tokens t-W+1..t."""
    model = build_model(windowed(n_layer=1, position={"name": position})).eval()
    ids = torch.randint(0, 97, (1, 16))
    changed = ids.clone()
    changed[0, 5] = (ids[0, 5] + 1) % 97
    with torch.no_grad():
        a, b = model(ids).logits[0], model(changed).logits[0]
    same = [(a[t] - b[t]).abs().max().item() < 1e-6 for t in range(16)]
    assert same == [t < 5 or t >= 5 + W for t in range(16)]


def test_layer_masks_cycle_over_the_layers() -> None:
    model = build_model(windowed(n_layer=4, layer_masks=["sliding_window", "causal"]))
    names = [m.registry_name for m in model.decoder.layer_masks]
    assert names == ["sliding_window", "causal", "sliding_window", "causal"]
    assert model.decoder.cache_windows() == [W, None, W, None]
    assert model.decoder.layer_masks[0] is model.decoder.layer_masks[2]  # built once


def test_layer_masks_of_the_stack_mask_equal_no_layer_masks() -> None:
    torch.manual_seed(0)
    plain = build_model(windowed()).eval()
    listed = build_model(windowed(layer_masks=["sliding_window"])).eval()
    listed.load_state_dict(plain.state_dict())
    ids = torch.randint(0, 97, (2, 20))
    with torch.no_grad():
        assert torch.equal(plain(ids).logits, listed(ids).logits)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"layer_masks": ["sliding_window", "causal"], "position": {"name": "rope"}, "n_kv_head": 2},
        {"layer_masks": ["sliding_window", "causal"], "position": {"name": "alibi"}},
        {"n_layer": 3, "layer_masks": ["sliding_window", "sliding_window", "causal"]},
    ],
    ids=["all_local", "gemma2_rope_gqa", "gemma2_alibi", "two_local_one_global"],
)
def test_rolling_cache_greedy_equals_full_forward_argmax(overrides: dict[str, Any]) -> None:
    """Greedy generation with the rolling cache, past the window, equals the argmax of the
    full (no-cache) forward at every step, and local layers keep at most W positions."""
    torch.manual_seed(0)
    model = build_model(windowed(**overrides)).eval()
    prompt = torch.randint(0, 97, (2, 6))  # longer than the window
    with torch.no_grad():
        out = generate(model, prompt, 20)
        ref = generate(model, prompt, 20, use_cache=False)
        full = model(out).logits  # [B, 26, V]
    assert torch.equal(out, ref)
    assert torch.equal(out[:, 6:], full[:, 5:-1].argmax(-1))


def test_rolling_cache_memory_stays_flat() -> None:
    torch.manual_seed(0)
    model = build_model(windowed(layer_masks=["sliding_window", "causal"])).eval()
    d = model.start_decoding(torch.randint(0, 97, (1, 3)), 24)
    stored: list[tuple[int, int]] = []
    with torch.no_grad():
        for _ in range(24):
            d.append(model.decode_step(d).argmax(-1))
            cache = d.cache
            assert cache is not None
            stored.append((cache.stored_length(0), cache.stored_length(1)))
    local = [s[0] for s in stored]
    assert max(local) == W and local[-10:] == [W] * 10  # flat past the window
    assert stored[-1][1] == 3 + 24  # the global layer's preallocated buffer holds every position


def test_rolling_cache_logits_equal_full_forward_with_padding() -> None:
    """Left padding in the prompt: the local layer's padding mask is cut to its kept keys."""
    torch.manual_seed(0)
    model = build_model(windowed(layer_masks=["sliding_window", "causal"])).eval()
    ids = torch.randint(0, 97, (2, 14))
    pad = torch.ones(2, 14, dtype=torch.long)
    pad[1, :3] = 0
    with torch.no_grad():
        cached = generate(model, ids, 8, attention_mask=pad)
        plain = generate(model, ids, 8, attention_mask=pad, use_cache=False)
    assert torch.equal(cached, plain)


def test_prefix_lm_layers_mixed_with_sliding_window() -> None:
    """The prefix-LM path: prefix_length reaches every layer; a local layer ignores it."""
    model = build_model(windowed(layer_masks=["sliding_window", "prefix_lm"])).eval()
    assert model.needs_prefix_length
    ids = torch.randint(0, 97, (2, 12))
    with torch.no_grad():
        out = generate(model, ids, 6, prefix_length=torch.tensor([4, 6]))
        ref = generate(model, ids, 6, prefix_length=torch.tensor([4, 6]), use_cache=False)
    assert torch.equal(out, ref)


@pytest.mark.parametrize("T,window", [(16, 4), (16, 1), (16, 16), (16, 40), (9, 3)])
def test_flops_count_only_the_visible_keys(T: int, window: int) -> None:
    mask = MASKS.build({"name": "sliding_window", "window": window})
    pos = torch.arange(T)
    visible = int(mask.allowed(pos, pos).sum())  # a direct count of the (query, key) pairs
    B, H, D = 2, 4, 8
    assert attention_score_flops(B, H, T, T, D, window) == 4 * B * H * D * visible
    # decoding: 1 query at position T - 1 over T keys sees min(T, window)
    assert attention_score_flops(B, H, 1, T, D, window) == 4 * B * H * D * min(T, window)
    assert attention_score_flops(B, H, T, T, D, window) <= 4 * B * H * D * T * window


def test_model_flops_use_the_window_per_layer() -> None:
    c = ModelConfig.from_dict(windowed(layer_masks=["sliding_window", "causal"]))
    full = ModelConfig.from_dict(tiny_model_dict())
    T, D, H = 32, 8, 4
    saved = (
        4
        * H
        * D
        * (
            T * T
            - int(
                MASKS.build({"name": "sliding_window", "window": W})
                .allowed(torch.arange(T), torch.arange(T))
                .sum()
            )
        )
    )
    assert build_model(full).forward_flops(1, T) - build_model(c).forward_flops(1, T) == saved


def test_sliding_window_bias_is_never_the_kernel_causal_flag() -> None:
    pos = torch.arange(6)
    bias = build_bias(
        MASKS.build({"name": "sliding_window", "window": 2}),
        pos,
        pos,
        None,
        None,
        None,
        torch.float32,
    )
    assert not bias.is_causal and bias.mask is not None
