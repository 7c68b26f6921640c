"""Incremental decoding with the KV cache gives the logits of a full forward pass."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from src.models import build_model
from src.models.components.kv_cache import KVCache
from src.models.generation import generate

MakeConfig = Callable[..., dict[str, Any]]


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"position": {"name": "rope"}, "n_kv_head": 2, "norm": {"name": "rmsnorm"}, "ffn": {"name": "swiglu"}},
        {"position": {"name": "alibi"}, "n_kv_head": 1},
        {"position": {"name": "sinusoidal"}, "norm_placement": "post"},
    ],
    ids=["gpt2", "llama_gqa", "alibi_mqa", "sinusoidal_post"],
)
@pytest.mark.parametrize("preallocated", [True, False])
def test_decoder_only_cache_matches_full_forward(make_tiny_config: MakeConfig, overrides: dict, preallocated: bool) -> None:
    model = build_model(make_tiny_config(**overrides)).eval()
    ids = torch.randint(0, 97, (2, 12))
    with torch.no_grad():
        full = model(ids).logits  # [B, T, V]
        cache = KVCache(2, max_length=16 if preallocated else None)
        steps = [model(ids[:, :5], cache=cache).logits]  # a prompt, then one token at a time
        steps += [model(ids[:, t : t + 1], cache=cache).logits for t in range(5, 12)]
    assert cache.offset == 12
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("position", ["learned", "rope", "alibi"])
def test_chunked_prefill_matches_full_forward(make_tiny_config: MakeConfig, position: str) -> None:
    """Several tokens at once on top of a non-empty cache (T > 1, S > T): the causal mask is offset."""
    model = build_model(make_tiny_config(position={"name": position})).eval()
    ids = torch.randint(0, 97, (2, 12))
    with torch.no_grad():
        full = model(ids).logits
        cache = KVCache(2, max_length=12)
        chunks = [(0, 5), (5, 8), (8, 9), (9, 12)]
        steps = [model(ids[:, a:b], cache=cache).logits for a, b in chunks]
        cache_e = KVCache(2)  # and the explicit path, which builds the offset mask itself
        steps_e = [model(ids[:, a:b], cache=cache_e, output_attentions=True).logits for a, b in chunks]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.cat(steps_e, dim=1), full, atol=1e-5, rtol=1e-5)


def test_encoder_decoder_cache_matches_full_forward(make_tiny_config: MakeConfig) -> None:
    cfg = make_tiny_config(family="encoder_decoder", position={"name": "sinusoidal"}, norm_placement="post", decoder_start_token_id=0)
    model = build_model(cfg).eval()
    src = torch.randint(1, 97, (2, 9))
    src_mask = torch.ones(2, 9, dtype=torch.long)
    src_mask[1, 6:] = 0  # the second source is padded on the right
    tgt = torch.randint(1, 97, (2, 6))
    with torch.no_grad():
        full = model(src, src_mask, decoder_input_ids=tgt).logits
        memory = model.encode(src, src_mask)  # [B, S, C], computed once
        cache = KVCache(2, max_length=8)
        steps = [
            model(encoder_hidden_states=memory, attention_mask=src_mask, decoder_input_ids=tgt[:, t : t + 1], cache=cache).logits
            for t in range(6)
        ]
    assert all(kv is not None for kv in cache.cross)  # cross-attention K/V kept after the first step
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", ["decoder_only", "encoder_decoder"])
def test_greedy_generation_same_with_and_without_cache(make_tiny_config: MakeConfig, family: str) -> None:
    model = build_model(make_tiny_config(family=family, decoder_start_token_id=0)).eval()
    prompt = torch.randint(1, 97, (2, 5))
    with_cache = generate(model, prompt, 6, use_cache=True)
    without = generate(model, prompt, 6, use_cache=False)
    assert torch.equal(with_cache, without)
    assert with_cache.shape == ((2, 11) if family == "decoder_only" else (2, 7))


def test_cache_overflow_raises() -> None:
    cache = KVCache(1, max_length=4)
    kv = torch.zeros(1, 2, 3, 8)  # [B, K, T, D]
    cache.update(0, kv, kv)
    cache.advance(3)
    with pytest.raises(ValueError, match="KV cache holds 4 positions"):
        cache.update(0, kv, kv)


def test_prefix_lm_generation_with_cache_matches_full_forward() -> None:
    """A prefix-LM decoder generates the same tokens with and without the cache when the
    prompt is its bidirectional prefix, and the prefix changes what it generates."""
    from src.models import build_model
    from src.models.generation import generate

    torch.manual_seed(0)
    model = build_model(dict(family="decoder_only", d_model=32, n_head=4, d_ff=64, n_layer=2, vocab_size=50,
                             max_seq_len=32, position={"name": "rope"}, mask={"name": "prefix_lm"})).eval()
    prompt = torch.randint(0, 50, (2, 6))
    prefix = torch.full((2,), 6)
    cached = generate(model, prompt, 10, prefix_length=prefix)
    uncached = generate(model, prompt, 10, prefix_length=prefix, use_cache=False)
    assert torch.equal(cached, uncached)
    # the prompt's first token sees the last one only through the bidirectional prefix
    with torch.inference_mode():
        full = model(cached[:, :-1], prefix_length=prefix).logits
        causal_only = model(cached[:, :-1], prefix_length=torch.zeros(2, dtype=torch.long)).logits
    assert not torch.allclose(full[:, :6], causal_only[:, :6])
    assert torch.equal(full[:, 5:].argmax(-1), cached[:, 6:])  # greedy tokens = argmax of the full forward


def test_generation_past_a_learned_table_slides_the_window() -> None:
    """Past its learned table a decoder keeps generating from its last max_seq_len tokens
    (nanoGPT's idx[:, -block_size:]); cached and uncached decoding agree with that loop."""
    from src.models import build_model
    from src.models.generation import generate

    torch.manual_seed(0)
    model = build_model(dict(family="decoder_only", d_model=32, n_head=4, d_ff=64, n_layer=2, vocab_size=50,
                             max_seq_len=16)).eval()
    prompt = torch.randint(0, 50, (2, 4))
    cached = generate(model, prompt, 30)
    uncached = generate(model, prompt, 30, use_cache=False)
    ref = prompt
    with torch.inference_mode():
        for _ in range(30):
            ref = torch.cat([ref, model(ref[:, -16:]).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert cached.shape == (2, 34)
    assert torch.equal(cached, ref) and torch.equal(uncached, ref)
