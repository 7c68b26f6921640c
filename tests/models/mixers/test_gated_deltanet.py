"""The Gated DeltaNet mixer: the full forward equals token-by-token steps with the state (float64,
1e-5); equal to transformers' ``Qwen3NextGatedDeltaNet`` (its torch path) with the weights mapped;
``forward_flops`` equals torch's FLOP counter; the refusals name their key."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from src.errors import ConfigError
from src.models.mixers import delta_rule
from src.models.mixers.gated_deltanet import GatedDeltaNet

C, T = 32, 19


def _layer(dtype: torch.dtype = torch.float64, **kw) -> GatedDeltaNet:
    torch.manual_seed(0)
    params = dict(expand_v=2.0, d_conv=4, chunk_size=8) | kw
    layer = GatedDeltaNet(d_model=C, n_head=4, **params).to(dtype).eval()
    with torch.no_grad():
        layer.o_norm.weight.uniform_(0.5, 1.5)
    return layer


def test_shapes() -> None:
    layer = _layer(torch.float32)
    assert (layer.n_head, layer.k_dim, layer.v_dim) == (4, 8, 16)
    y, state = layer(torch.randn(2, T, C))
    assert y.shape == (2, T, C)
    assert state.conv.shape == (2, 2 * 32 + 64, 3) and state.recurrent.shape == (2, 4, 8, 16)
    assert GatedDeltaNet(d_model=C, n_head=2, head_dim=4, expand_v=1).v_dim == 4


@pytest.mark.parametrize("chunk", [1, 4, 5, 64])
def test_forward_equals_steps_with_the_state(chunk: int) -> None:
    layer = _layer(chunk_size=chunk)
    x = torch.randn(2, T, C, dtype=torch.float64)
    y, final = layer(x)
    state, steps = layer.init_state(2, x.device, x.dtype), []
    for t in range(T):
        y_t, state = layer(x[:, t : t + 1], state)
        steps.append(y_t)
    torch.testing.assert_close(torch.cat(steps, 1), y, atol=1e-5, rtol=0)
    torch.testing.assert_close(state.recurrent, final.recurrent, atol=1e-5, rtol=0)
    torch.testing.assert_close(state.conv, final.conv, atol=1e-12, rtol=0)


def test_prefill_then_continue_from_a_plain_tuple() -> None:
    layer = _layer()
    x = torch.randn(1, T, C, dtype=torch.float64)
    y, _ = layer(x)
    y1, state = layer(x[:, :7])
    y2, _ = layer(x[:, 7:], tuple(state))
    torch.testing.assert_close(torch.cat([y1, y2], 1), y, atol=1e-5, rtol=0)


def test_equals_transformers_qwen3_next_gated_deltanet() -> None:
    """Qwen3-Next's layer packs [q, k, v, z] and [b, a] per key head; unpacked into our
    projections (z is our g_proj, norm our o_norm, out_proj our o_proj), the outputs agree."""
    qwen = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
    from transformers import Qwen3NextConfig

    H, K, V = 4, 8, 16
    layer = _layer(torch.float32)
    config = Qwen3NextConfig(
        hidden_size=C, linear_num_key_heads=H, linear_num_value_heads=H, linear_key_head_dim=K,
        linear_value_head_dim=V, linear_conv_kernel_dim=4, rms_norm_eps=GatedDeltaNet.norm_eps,
        num_hidden_layers=1, layer_types=["linear_attention"], vocab_size=16,
    )  # fmt: skip
    theirs = qwen.Qwen3NextGatedDeltaNet(config, layer_idx=0).eval()
    with torch.no_grad():
        qkvz = theirs.in_proj_qkvz.weight.view(H, 2 * K + 2 * V, C)  # per key head [q k v z]
        q, k, v, z = qkvz.split([K, K, V, V], dim=1)
        for ours, w in ((layer.q_proj, q), (layer.k_proj, k), (layer.v_proj, v), (layer.g_proj, z)):
            ours.weight.copy_(w.reshape(-1, C))
        b, a = theirs.in_proj_ba.weight.view(H, 2, C).unbind(1)
        layer.b_proj.weight.copy_(b)
        layer.a_proj.weight.copy_(a)
        layer.conv1d.weight.copy_(theirs.conv1d.weight)
        layer.A_log.copy_(theirs.A_log)
        layer.dt_bias.copy_(torch.randn(H))
        theirs.dt_bias.copy_(layer.dt_bias)
        theirs.norm.weight.copy_(layer.o_norm.weight)
        layer.o_proj.weight.copy_(theirs.out_proj.weight)
        x = torch.randn(2, 70, C)  # past their chunk of 64, not a multiple
        torch.testing.assert_close(layer(x)[0], theirs(x), atol=1e-5, rtol=0)


@pytest.mark.parametrize("seq_len", [1, 8, 11])
def test_forward_flops_equals_torch_counter(seq_len: int) -> None:
    """Matmuls and the conv as FlopCounterMode counts them (not the triangular solve, not the
    elementwise work)."""
    layer = _layer(torch.float32)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        layer(torch.randn(3, seq_len, C))
    assert layer.forward_flops(3, seq_len) == counter.get_total_flops()


def test_builds_on_meta() -> None:
    with torch.device("meta"):
        layer = GatedDeltaNet(d_model=C, n_head=4)
    assert layer.A_log.is_meta


@pytest.mark.parametrize(
    ("params", "key"),
    [
        ({"chunk_size": 0}, "model.mixer.chunk_size=0"),
        ({"d_conv": 0}, "model.mixer.d_conv=0"),
        ({"head_dim": 0}, "model.mixer.head_dim=0"),
        ({"expand_v": 0}, "model.mixer.expand_v=0"),
        ({"expand_v": 0.3}, "model.mixer.expand_v=0.3"),
        ({"n_head": 3}, "model.n_head=3"),
    ],
)
def test_refusals_name_the_key(params: dict, key: str) -> None:
    kw = {"d_model": C, "n_head": 4} | params
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as err:
        GatedDeltaNet.check_args(**kw)
    assert "\n" not in str(err.value)


def test_check_args_accepts_the_defaults_and_context() -> None:
    GatedDeltaNet.check_args(d_model=C, n_head=4, n_layer=2, vocab_size=10)
    GatedDeltaNet.check_args(d_model=C, n_head=3, head_dim=16, expand_v=1.5)


def test_the_core_runs_without_autocast(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under bf16 autocast the projections run in bf16 but the core in float32 (its decays and
    sums lose too much in bf16): autocast is off inside it, and the output stays near the float32
    layer's."""
    seen = []
    core = delta_rule.chunk_gated_delta_rule

    def spy(*args, **kwargs):
        seen.append(torch.is_autocast_enabled("cpu"))
        return core(*args, **kwargs)

    monkeypatch.setattr(delta_rule, "chunk_gated_delta_rule", spy)
    layer = _layer(torch.float32)
    x = torch.randn(2, T, C)
    with torch.no_grad():
        y32, _ = layer(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y16, _ = layer(x)
    assert seen == [False, False]
    torch.testing.assert_close(y16.float(), y32, atol=0.05, rtol=0.05)
