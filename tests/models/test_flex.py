"""``model.attn_kernel=flex`` (components/flex.py) against the SDPA / explicit path, pattern by
pattern: the same weights, logits within 1e-5 in float32. FlexAttention's eager implementation
runs here (``flex.COMPILE`` off: no compile time); one slow test runs the compiled kernel."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from src.errors import ConfigError
from src.models import build_model
from src.models.components import flex
from src.models.components.documents import document_ids
from src.models.config import ModelConfig
from src.models.generation import generate
from tests.conftest import tiny_model_dict

T = 20
W = {"name": "sliding_window", "window": 5}

PATTERNS: dict[str, dict[str, Any]] = {
    "causal": {},
    "causal_rope": {"position": {"name": "rope"}},
    "bidirectional": {"family": "encoder_only"},
    "prefix_lm": {"mask": {"name": "prefix_lm"}},
    "sliding_window": {"mask": W},
    "layer_masks": {"mask": W, "layer_masks": ["sliding_window", "causal"], "n_layer": 3},
    "attn_softcap": {"attn_softcap": 2.0, "mask": W},
    "sinks_learned": {"sinks": {"name": "learned"}, "mask": W},
    "sinks_token": {"sinks": {"name": "token", "count": 3}, "mask": W},
    "sinks_token_bidirectional": {"family": "encoder_only", "sinks": {"name": "token", "count": 2}},
    "differential": {"attention": {"name": "differential"}, "mask": W},
    "gqa": {"n_kv_head": 2, "position": {"name": "rope"}, "mask": W},
    "alibi": {"position": {"name": "alibi"}, "mask": W},
    "alibi_prefix_lm_sinks": {
        "position": {"name": "alibi"},
        "mask": {"name": "prefix_lm"},
        "sinks": {"name": "token", "count": 2},
    },
    "t5_bias_encoder_decoder": {
        "family": "encoder_decoder",
        "position": {"name": "t5_bias", "num_buckets": 8, "max_distance": 16},
    },
    "softcap_differential_learned_sink_gqa": {
        "attention": {"name": "differential"},
        "n_kv_head": 2,
        "attn_softcap": 3.0,
        "sinks": {"name": "learned"},
        "layer_masks": ["sliding_window", "causal"],
        "mask": W,
    },
}


@pytest.fixture(autouse=True)
def eager_flex(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flex, "COMPILE", False)


def pair(**overrides: Any) -> tuple[torch.nn.Module, torch.nn.Module]:
    """(sdpa model, flex model) holding the same random weights, in eval mode."""
    torch.manual_seed(0)
    sdpa = build_model(tiny_model_dict(**overrides)).eval()
    fx = build_model(tiny_model_dict(**overrides, attn_kernel="flex")).eval()
    with torch.no_grad():  # non-zero sink logits: a zero logit would hide a sign error
        for p in sdpa.parameters():
            p.add_(0.1 * torch.randn_like(p))
    fx.load_state_dict(sdpa.state_dict())
    return sdpa, fx


def run(model: torch.nn.Module, ids: torch.Tensor, **kw: Any) -> torch.Tensor:
    with torch.no_grad():
        if model.prompt_is_source:
            return model(input_ids=ids, decoder_input_ids=ids[:, :11], **kw).logits
        if model.needs_prefix_length:
            kw["prefix_length"] = torch.tensor([4, 9])
        return model(ids, **kw).logits


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_flex_equals_sdpa(pattern: str) -> None:
    sdpa, fx = pair(**PATTERNS[pattern])
    ids = torch.randint(0, 97, (2, T))
    expected = run(sdpa, ids)
    got = run(fx, ids)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert not torch.equal(expected, run(sdpa, ids.flip(1)))  # the input matters


@pytest.mark.parametrize("pattern", ["causal", "sliding_window", "sinks_token", "alibi"])
def test_flex_with_padding_equals_sdpa(pattern: str) -> None:
    sdpa, fx = pair(**PATTERNS[pattern])
    ids = torch.randint(0, 97, (2, T))
    attention_mask = torch.ones(2, T, dtype=torch.long)
    attention_mask[0, :6] = 0  # left padding of row 0
    a, b = (
        run(sdpa, ids, attention_mask=attention_mask),
        run(fx, ids, attention_mask=attention_mask),
    )
    torch.testing.assert_close(b[0, 6:], a[0, 6:], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(b[1], a[1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("pattern", ["causal", "sliding_window", "sinks_token", "differential"])
def test_flex_document_mask_equals_sdpa(pattern: str) -> None:
    sdpa, fx = pair(**PATTERNS[pattern], position={"name": "rope"})
    ids = torch.randint(1, 97, (2, T))
    ids[0, 5], ids[0, 12], ids[1, 9] = 0, 0, 0  # eos = 0 ends a document
    docs = document_ids(ids, 0)
    torch.testing.assert_close(
        run(fx, ids, document_ids=docs), run(sdpa, ids, document_ids=docs), atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("pattern", ["differential", "gqa", "alibi_prefix_lm_sinks"])
def test_float64_agrees_to_rounding(pattern: str) -> None:
    """In float64 (where no path casts to float32: a cap or a sink logit does, on both) the two
    kernels differ by rounding only."""
    sdpa, fx = pair(**PATTERNS[pattern])
    sdpa, fx = sdpa.double(), fx.double()
    ids = torch.randint(0, 97, (2, T))
    torch.testing.assert_close(run(fx, ids), run(sdpa, ids), atol=1e-12, rtol=1e-10)


def test_probabilities_still_take_the_explicit_path() -> None:
    sdpa, fx = pair(mask=W)
    ids = torch.randint(0, 97, (2, T))
    with torch.no_grad():
        a = sdpa(ids, output_attentions=True).attentions
        b = fx(ids, output_attentions=True).attentions
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y)


def test_cached_generation_equals_sdpa() -> None:
    """Decoding with the KV cache keeps SDPA's masks (one query per step), so flex generates the
    same tokens; the prompt's forward is flex's."""
    sdpa, fx = pair(mask=W, layer_masks=["sliding_window", "causal"], position={"name": "rope"})
    prompt = torch.randint(0, 97, (2, 4))
    a = generate(sdpa, prompt, max_new_tokens=14, do_sample=False)
    b = generate(fx, prompt, max_new_tokens=14, do_sample=False)
    assert torch.equal(a, b)


def test_the_flex_bias_replaces_the_dense_mask() -> None:
    _, fx = pair(mask=W)
    stack = fx.decoder
    pos = torch.arange(T)
    biases = stack._self_biases(pos, 0, None, None, False, torch.float32)
    (bias,) = biases.values()
    assert bias.mask is None and not bias.is_causal and bias.flex is not None
    # a 5-key window over 20 queries: the block mask's dense form is the window
    dense = bias.flex.block_mask.to_dense()  # [1, 1, q blocks, kv blocks]
    assert dense.shape[-2:] == (1, 1)  # one 128-block at T = 20
    assert bias.flex.block_mask.mask_mod(
        torch.tensor(0), torch.tensor(0), torch.tensor(9), torch.tensor(5)
    )
    assert not bias.flex.block_mask.mask_mod(
        torch.tensor(0), torch.tensor(0), torch.tensor(9), torch.tensor(4)
    )


# -- refusals -------------------------------------------------------------------------------


def test_unknown_kernel_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"model\.attn_kernel='fast'.*sdpa.*flex") as e:
        ModelConfig.from_dict(tiny_model_dict(attn_kernel="fast"))
    assert "\n" not in str(e.value)


def test_flex_with_dropout_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"model\.attn_kernel=flex.*model\.dropout=0\.1") as e:
        ModelConfig.from_dict(tiny_model_dict(attn_kernel="flex", dropout=0.1))
    assert "\n" not in str(e.value)


def test_a_torch_without_flex_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flex, "flex_attention", None)
    with pytest.raises(ConfigError, match=r"model\.attn_kernel=flex.*model\.attn_kernel=sdpa"):
        ModelConfig.from_dict(tiny_model_dict(attn_kernel="flex"))
    ModelConfig.from_dict(tiny_model_dict())  # sdpa needs nothing


def test_training_on_cpu_is_refused_in_one_line() -> None:
    """torch's CPU FlexAttention has no backward: the forward that would need one says so."""
    _, fx = pair(mask=W)
    fx.train()
    with pytest.raises(ValueError, match=r"model\.attn_kernel=flex.*CPU.*model\.attn_kernel=sdpa"):
        fx(torch.randint(0, 97, (2, T)))


def test_cpu_backward_is_still_missing_in_torch() -> None:
    """Pins the reason for the refusal above: when torch adds a CPU backward, this fails, and the
    refusal can go."""
    from torch.nn.attention.flex_attention import flex_attention

    q = torch.randn(1, 1, 8, 4, requires_grad=True)
    with pytest.raises(NotImplementedError, match="backward on CPU"):
        flex_attention(q, q, q)


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides",
    [
        # the fused CPU kernel: cap, ALiBi's captured bias, GQA, differential's 2d values
        {
            "attention": {"name": "differential"},
            "n_kv_head": 2,
            "attn_softcap": 3.0,
            "position": {"name": "alibi"},
            "mask": W,
        },
        # a learned sink logit on CPU: the eager kernel (no compiled log-sum-exp on CPU)
        PATTERNS["softcap_differential_learned_sink_gqa"],
    ],
    ids=["fused", "sink_logit_eager"],
)
def test_compiled_kernel_equals_sdpa(
    monkeypatch: pytest.MonkeyPatch, overrides: dict[str, Any]
) -> None:
    """The fused kernel torch.compile generates on CPU (about 20 s of compilation)."""
    monkeypatch.setattr(flex, "COMPILE", True)
    sdpa, fx = pair(**overrides)
    ids = torch.randint(0, 97, (2, T))
    torch.testing.assert_close(run(fx, ids), run(sdpa, ids), atol=1e-5, rtol=1e-5)
