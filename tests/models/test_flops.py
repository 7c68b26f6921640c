"""``model.forward_flops`` (the one FLOPs count: inspect, MFU, benchmarks) against PyTorch's own
``torch.utils.flop_counter.FlopCounterMode`` on a real forward pass of every family.

SDPA runs on its math backend here: on CPU the fused kernels are invisible to the counter, the
math backend is two counted ``bmm`` over the full T × S grid, which is what the count defines.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from src.models import build_model
from tests.conftest import tiny_model_dict

CASES: dict[str, dict[str, Any]] = {
    "decoder_only": {},
    "decoder_only_rope_gqa_swiglu": {
        "position": {"name": "rope"},
        "n_kv_head": 2,
        "ffn": {"name": "swiglu"},
        "bias": False,
        "tie_embeddings": False,
        "norm": {"name": "rmsnorm"},
    },
    "decoder_only_padded_vocab_alibi": {"vocab_pad_multiple": 64, "position": {"name": "alibi"}},
    "prefix_lm": {"mask": {"name": "prefix_lm"}},
    "encoder_only": {"family": "encoder_only", "norm_placement": "post", "embedding_norm": True},
    "encoder_decoder": {
        "family": "encoder_decoder",
        "n_encoder_layer": 2,
        "n_decoder_layer": 3,
        "position": {"name": "sinusoidal"},
        "norm_placement": "post",
    },
}


def counted(fn: Any) -> int:
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter, torch.no_grad():
        fn()
    return counter.get_total_flops()


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("output_attentions", [False, True])  # the SDPA path and the explicit one
def test_forward_flops_match_the_flop_counter(case: str, output_attentions: bool) -> None:
    model = build_model(tiny_model_dict(**CASES[case])).eval()
    B, T = 3, 24
    ids = torch.randint(0, 97, (B, T))
    if model.prompt_is_source:

        def run() -> None:
            model(input_ids=ids, decoder_input_ids=ids, output_attentions=output_attentions)
    else:
        extra = {"prefix_length": torch.full((B,), 5)} if model.needs_prefix_length else {}

        def run() -> None:
            model(ids, output_attentions=output_attentions, **extra)

    expected = counted(run)
    assert expected > 0
    assert model.forward_flops(B, T) == pytest.approx(expected, rel=0.01)


def test_encoder_decoder_source_and_target_lengths() -> None:
    model = build_model(tiny_model_dict(**CASES["encoder_decoder"])).eval()
    src, tgt = torch.randint(0, 97, (2, 20)), torch.randint(0, 97, (2, 7))
    expected = counted(lambda: model(input_ids=src, decoder_input_ids=tgt))
    assert model.forward_flops(2, 20, target_len=7) == pytest.approx(expected, rel=0.01)
    assert model.training_flops(2, 20, target_len=7) == 3 * model.forward_flops(2, 20, target_len=7)


def test_counts_on_the_meta_device_equal_the_real_model() -> None:
    cfg = tiny_model_dict(position={"name": "rope"})
    with torch.device("meta"):
        meta = build_model(cfg)
    assert meta.forward_flops(4, 32) == build_model(cfg).forward_flops(4, 32)


# -- every attention pattern (issue 59) ------------------------------------------------------------
W = {"name": "sliding_window", "window": 5}
PATTERNS: dict[str, dict[str, Any]] = {
    "sliding_window": {"mask": W},
    "layer_masks": {"mask": W, "layer_masks": ["sliding_window", "causal"], "n_layer": 3},
    "attn_softcap_final_softcap": {"attn_softcap": 5.0, "final_softcap": 3.0},
    "sinks_learned": {"sinks": {"name": "learned"}},
    "sinks_token": {"sinks": {"name": "token", "count": 3}, "mask": W},
    "sinks_token_encoder_only": {"family": "encoder_only", "sinks": {"name": "token", "count": 2}},
    "differential": {"attention": {"name": "differential"}},
    "differential_window_gqa": {"attention": {"name": "differential"}, "n_kv_head": 2, "mask": W},
    "gqa": {"n_kv_head": 1, "position": {"name": "rope"}},
    "prefix_lm_alibi_window": {"mask": {"name": "prefix_lm"}, "position": {"name": "alibi"}},
}


def dense_minus_windowed(model: Any, B: int, T: int) -> int:
    """What the dense kernels compute beyond the window's count: the hidden (query, key) pairs of
    each sliding-window layer (their count is checked against the mask in
    test_sliding_window.py::test_flops_count_only_the_visible_keys)."""
    extra = 0
    for stack in model.stacks().values():
        for block, window in zip(stack.blocks, stack.cache_windows(), strict=True):
            if window is not None:
                a = block.attn
                extra += a.forward_flops(B, T, T) - a.forward_flops(B, T, T, window)
    return extra


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_every_pattern_matches_the_flop_counter(pattern: str) -> None:
    """``forward_flops`` against the counter on the SDPA/explicit path, the window's hidden pairs
    set apart. (FlopCounterMode cannot run torch 2.13's eager FlexAttention on CPU: "no
    implementation found for 'torch.ops.higher_order.flex_attention'"; the count is the
    kernel's anyway, the same number for model.attn_kernel=flex.)"""
    model = build_model(tiny_model_dict(**PATTERNS[pattern])).eval()
    B, T = 2, 24
    ids = torch.randint(0, 97, (B, T))
    extra = {"prefix_length": torch.full((B,), 5)} if model.needs_prefix_length else {}
    expected = counted(lambda: model(ids, **extra)) - dense_minus_windowed(model, B, T)
    assert expected > 0
    assert model.forward_flops(B, T) == pytest.approx(expected, rel=0.01)


def test_document_masking_matches_the_flop_counter() -> None:
    """Document masking hides pairs but SDPA still computes the full grid: the count is the
    unmasked one (FlexAttention would skip whole empty 128 × 128 blocks only)."""
    from src.models.components.documents import document_ids

    model = build_model(tiny_model_dict(position={"name": "rope"})).eval()
    ids = torch.randint(1, 97, (2, 24))
    ids[:, 7] = 0
    expected = counted(lambda: model(ids, document_ids=document_ids(ids, 0)))
    assert model.forward_flops(2, 24) == pytest.approx(expected, rel=0.01)
