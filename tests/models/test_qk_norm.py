"""QK-norm (``model/qk_norm``): parity with the two transformers models that have it, each in its own
scope. Qwen 3 normalises each head (``scope: head``; the whole model is checked through the qwen3
format in tests/models/hf/test_parity.py); OLMo 2 normalises the whole projection of all heads
(``scope: all``), checked here at the attention module, since OLMo 2's placement (a norm after each
sublayer, inside the residual) is not one of ours."""

from __future__ import annotations

import pytest
import torch

from src.errors import ConfigError
from src.models import build_model
from src.models.components.attention import AttentionBias, MultiHeadAttention
from src.models.components.positions import RotaryPosition
from src.models.components.qk_norm import QK_NORMS
from tests.conftest import tiny_model_dict

transformers = pytest.importorskip("transformers")


def _randomised(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(
                torch.randn(p.shape, generator=g) * (p.shape[-1] ** -0.5 if p.dim() > 1 else 0.3)
                + (p.dim() == 1)
            )
    return module.eval()


@pytest.mark.parametrize(("model", "scope"), [("olmo2", "all"), ("qwen3", "head")])
def test_attention_matches_transformers(model: str, scope: str) -> None:
    """Our self-attention with model/qk_norm=rmsnorm equals Olmo2Attention (scope all: weights [H·D], [K·D])
    and Qwen3Attention (scope head: weights [D]) with the same weights, RoPE and a causal mask."""
    t = transformers
    C, H, K, D, T = 32, 4, 2, 16, 9
    kwargs = dict(
        hidden_size=C,
        num_attention_heads=H,
        num_key_value_heads=K,
        head_dim=D,
        rms_norm_eps=1e-5,
        max_position_embeddings=64,
        rope_theta=500.0,
        attention_bias=False,
    )
    if model == "olmo2":
        cfg = t.Olmo2Config(**kwargs)
        ref, rotary = (
            t.models.olmo2.modeling_olmo2.Olmo2Attention(cfg, 0),
            t.models.olmo2.modeling_olmo2.Olmo2RotaryEmbedding(cfg),
        )
    else:
        cfg = t.Qwen3Config(**kwargs)
        ref, rotary = (
            t.models.qwen3.modeling_qwen3.Qwen3Attention(cfg, 0),
            t.models.qwen3.modeling_qwen3.Qwen3RotaryEmbedding(cfg),
        )
    cfg._attn_implementation = "eager"
    ref = _randomised(ref, 7)
    qk = QK_NORMS.build({"name": "rmsnorm", "eps": 1e-5, "scope": scope}, head_dim=D)
    ours = MultiHeadAttention(C, H, K, bias=False, head_dim=D, qk_norm=qk).eval()
    assert (
        ours.q_norm.norm.weight.shape
        == ref.q_norm.weight.shape
        == ((H * D,) if scope == "all" else (D,))
    )
    with torch.no_grad():
        ours.qkv.weight.copy_(torch.cat([ref.q_proj.weight, ref.k_proj.weight, ref.v_proj.weight]))
        ours.out.weight.copy_(ref.o_proj.weight)
        ours.q_norm.norm.weight.copy_(ref.q_norm.weight)
        ours.k_norm.norm.weight.copy_(ref.k_norm.weight)
        x = torch.randn(2, T, C, generator=torch.Generator().manual_seed(8))
        pos = torch.arange(T)
        # [1, 1, T, T] additive causal mask
        mask = torch.full((T, T), float("-inf")).triu(1)[None, None]
        expected, _ = ref(x, rotary(x, pos[None].expand(2, T)), mask)
        for need_weights in (False, True):  # SDPA and the explicit path
            got = ours(
                x,
                AttentionBias(is_causal=True),
                position=RotaryPosition(D, theta=500.0),
                positions=pos,
                need_weights=need_weights,
            ).out
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["rmsnorm", "layernorm"])
@pytest.mark.parametrize("scope", ["head", "all"])
def test_qk_norm_normalises_queries_and_keys(name: str, scope: str) -> None:
    """With unit weights, every head's queries (scope head) or each token's whole projection (scope all)
    has unit RMS (and zero mean for layernorm) whatever the input scale."""
    qk = QK_NORMS.build({"name": name, "scope": scope}, head_dim=8, bias=False)
    norm = qk.build(4)
    x = 50 * torch.randn(2, 5, 4 * 8)  # [B, T, H·D]
    y = norm(x)
    parts = y.unflatten(-1, (4, 8)) if scope == "head" else y
    torch.testing.assert_close(
        parts.pow(2).mean(-1), torch.ones(parts.shape[:-1]), atol=1e-3, rtol=0
    )
    if name == "layernorm":
        torch.testing.assert_close(parts.mean(-1), torch.zeros(parts.shape[:-1]), atol=1e-4, rtol=0)


@pytest.mark.parametrize("family", ["decoder_only", "encoder_only", "encoder_decoder"])
def test_qk_norm_in_every_attention(family: str) -> None:
    model = build_model(
        tiny_model_dict(
            family=family, decoder_start_token_id=1, qk_norm={"name": "layernorm", "scope": "all"}
        )
    )
    attns = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    # cross-attention included
    assert attns and all(a.q_norm is not None and a.k_norm is not None for a in attns)
    # the bias follows model.bias (true here)
    assert all(a.q_norm.norm.bias is not None for a in attns)
    plain = build_model(tiny_model_dict(family=family, decoder_start_token_id=1))
    assert all(m.q_norm is None for m in plain.modules() if isinstance(m, MultiHeadAttention))
    per_attention = 2 * 2 * 4 * 8  # q and k norms over H·D = 32 channels, weight and bias
    assert model.num_parameters() - plain.num_parameters() == per_attention * len(attns)


def test_qk_norm_bad_values_name_the_key() -> None:
    with pytest.raises(ConfigError, match="model.qk_norm.scope='heads' is not known; use 'head'"):
        build_model(tiny_model_dict(qk_norm={"name": "rmsnorm", "scope": "heads"}))
    with pytest.raises(
        ConfigError,
        match="unknown qk_norm 'batchnorm'; registered qk_norms: layernorm, none, rmsnorm",
    ):
        build_model(tiny_model_dict(qk_norm={"name": "batchnorm"}))
