"""Incremental decoding with the KV cache gives the logits of a full forward pass."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from src.models import build_model
from src.models.components.kv_cache import KVCache
from src.models.generation import generate
from tests.conftest import tiny_model_dict as make_tiny_config_dict

MakeConfig = Callable[..., dict[str, Any]]


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {
            "position": {"name": "rope"},
            "n_kv_head": 2,
            "norm": {"name": "rmsnorm"},
            "ffn": {"name": "swiglu"},
        },
        {"position": {"name": "alibi"}, "n_kv_head": 1},
        {"position": {"name": "sinusoidal"}, "norm_placement": "post"},
    ],
    ids=["gpt2", "llama_gqa", "alibi_mqa", "sinusoidal_post"],
)
@pytest.mark.parametrize("preallocated", [True, False])
def test_decoder_only_cache_matches_full_forward(
    make_tiny_config: MakeConfig, overrides: dict, preallocated: bool
) -> None:
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
        steps_e = [
            model(ids[:, a:b], cache=cache_e, output_attentions=True).logits for a, b in chunks
        ]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.cat(steps_e, dim=1), full, atol=1e-5, rtol=1e-5)


def test_encoder_decoder_cache_matches_full_forward(make_tiny_config: MakeConfig) -> None:
    cfg = make_tiny_config(
        family="encoder_decoder",
        position={"name": "sinusoidal"},
        norm_placement="post",
        decoder_start_token_id=0,
    )
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
            model(
                encoder_hidden_states=memory,
                attention_mask=src_mask,
                decoder_input_ids=tgt[:, t : t + 1],
                cache=cache,
            ).logits
            for t in range(6)
        ]
    # cross-attention K/V kept after the first step
    assert all(kv is not None for kv in cache.cross)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", ["decoder_only", "encoder_decoder"])
def test_greedy_generation_same_with_and_without_cache(
    make_tiny_config: MakeConfig, family: str
) -> None:
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
    model = build_model(
        dict(
            family="decoder_only",
            d_model=32,
            n_head=4,
            d_ff=64,
            n_layer=2,
            vocab_size=50,
            max_seq_len=32,
            position={"name": "rope"},
            mask={"name": "prefix_lm"},
        )
    ).eval()
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
    # greedy tokens = argmax of the full forward
    assert torch.equal(full[:, 5:].argmax(-1), cached[:, 6:])


def test_generation_past_a_learned_table_slides_the_window() -> None:
    """Past its learned table a decoder keeps generating from its last max_seq_len tokens
    (nanoGPT's idx[:, -block_size:]); cached and uncached decoding agree with that loop."""
    from src.models import build_model
    from src.models.generation import generate

    torch.manual_seed(0)
    model = build_model(
        dict(
            family="decoder_only",
            d_model=32,
            n_head=4,
            d_ff=64,
            n_layer=2,
            vocab_size=50,
            max_seq_len=16,
        )
    ).eval()
    prompt = torch.randint(0, 50, (2, 4))
    cached = generate(model, prompt, 30)
    uncached = generate(model, prompt, 30, use_cache=False)
    ref = prompt
    with torch.inference_mode():
        for _ in range(30):
            ref = torch.cat(
                [ref, model(ref[:, -16:]).logits[:, -1].argmax(-1, keepdim=True)], dim=1
            )
    assert cached.shape == (2, 34)
    assert torch.equal(cached, ref) and torch.equal(uncached, ref)


# -- the variants of issue 13: generation with the cache equals generation without it, tokens and logits ----------
NEW_VARIANTS = {
    "sandwich": {"norm_placement": "sandwich", "position": {"name": "sinusoidal"}},
    "deepnorm": {"norm_placement": "deepnorm", "position": {"name": "rope"}},
    "rezero": {"norm_placement": "rezero", "position": {"name": "alibi"}},
    "qk_rmsnorm_head": {
        "qk_norm": {"name": "rmsnorm"},
        "position": {"name": "rope"},
        "n_kv_head": 2,
    },
    "qk_layernorm_all": {
        "qk_norm": {"name": "layernorm", "scope": "all"},
        "position": {"name": "none"},
    },
    "t5_bias": {
        "position": {"name": "t5_bias", "num_buckets": 8, "max_distance": 12},
        "norm": {"name": "rmsnorm"},
    },
    "t5_shape": {
        "position": {"name": "t5_bias"},
        "d_head": 12,
        "attn_scale": 1.0,
        "bias": False,
        "ffn": {"name": "geglu"},
        "scale_head": True,
    },
    "rope_linear": {"position": {"name": "rope", "scaling": {"name": "linear", "factor": 2.0}}},
    "rope_yarn": {"position": {"name": "rope", "scaling": {"name": "yarn", "factor": 4.0}}},
    "rope_llama3": {"position": {"name": "rope", "scaling": {"name": "llama3", "factor": 4.0}}},
    "rope_dynamic": {"position": {"name": "rope", "scaling": {"name": "dynamic", "factor": 2.0}}},
}


def decode_logits(
    model: torch.nn.Module, prompt: torch.Tensor, continuation: torch.Tensor, use_cache: bool
) -> torch.Tensor:
    """The family's own decoding steps (what generate() runs), fed a given continuation [B, n]: logits [B, n, V]."""
    with torch.inference_mode():
        d = model.start_decoding(prompt, continuation.shape[1], use_cache=use_cache)
        logits = []
        for t in range(continuation.shape[1]):
            logits.append(model.decode_step(d))  # [B, V]
            d.append(continuation[:, t])
    return torch.stack(logits, dim=1)


@pytest.mark.parametrize("family", ["decoder_only", "encoder_decoder"])
@pytest.mark.parametrize("variant", sorted(NEW_VARIANTS))
def test_new_variants_decode_the_same_with_and_without_the_cache(family: str, variant: str) -> None:
    """20 new tokens (after a 10-token prompt) cross max_seq_len = 16: dynamic RoPE changes its base at every
    step past it (the cache then gives way to a full recompute), T5's causal buckets reach their log range.
    Step logits are compared on a random continuation (greedy decoding of a random model repeats a token)."""
    torch.manual_seed(0)
    cfg = dict(NEW_VARIANTS[variant], max_seq_len=16, family=family, decoder_start_token_id=0)
    model = build_model(make_tiny_config_dict(**cfg)).eval()
    g = torch.Generator().manual_seed(1)
    # weights of unit scale and ReZero's gates open, so that every part of every block counts
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(
                torch.randn(p.shape, generator=g) * p.shape[-1] ** -0.5
                if p.dim() > 1
                else 1 + 0.2 * torch.randn(p.shape, generator=g)
            )
    prompt, continuation = torch.randint(1, 97, (2, 10)), torch.randint(1, 97, (2, 20))
    cached = decode_logits(model, prompt, continuation, use_cache=True)
    torch.testing.assert_close(
        cached, decode_logits(model, prompt, continuation, use_cache=False), atol=1e-5, rtol=1e-5
    )
    # the tokens
    assert torch.equal(generate(model, prompt, 20), generate(model, prompt, 20, use_cache=False))


def test_a_cache_past_a_dynamic_ropes_original_length_is_refused(
    make_tiny_config: MakeConfig,
) -> None:
    """Past its original length a dynamic RoPE rotates every position by the current length's base, so keys
    cached at a shorter length are stale: extending the cache there fails loudly (generate() recomputes)."""
    model = build_model(
        make_tiny_config(
            max_seq_len=16, position={"name": "rope", "scaling": {"name": "dynamic", "factor": 2}}
        )
    )
    cache = KVCache(2)
    with torch.no_grad():
        model(torch.zeros(1, 16, dtype=torch.long), cache=cache)  # up to the original length: exact
        with pytest.raises(
            ValueError, match="KV cache of 17 positions: past model.position's original length 16"
        ):
            model(torch.zeros(1, 1, dtype=torch.long), cache=cache)
