"""The Mamba-2 mixer: equal to transformers' ``Mamba2Mixer`` (torch path, weights copied by name)
to 1e-4 in float32 past one chunk; the full forward equals token-by-token steps with the state
(float64, 1e-5); ``forward_flops`` equals torch's FLOP counter; the refusals name their key."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from src.errors import ConfigError
from src.models.mixers import ssd
from src.models.mixers.mamba2_layer import Mamba2

C, T = 32, 21


def _layer(dtype: torch.dtype = torch.float64, **kw) -> Mamba2:
    torch.manual_seed(0)
    params = dict(d_state=8, d_conv=4, expand=2, n_groups=2, chunk_size=8) | kw
    layer = Mamba2(d_model=C, n_head=4, **params).to(dtype).eval()
    with torch.no_grad():  # D and the norm's weight away from their 1s, so the test sees them
        layer.D.uniform_(0.5, 1.5)
        layer.norm.weight.uniform_(0.5, 1.5)
    return layer


def test_shapes_and_heads() -> None:
    layer = _layer(torch.float32)
    assert (layer.n_heads, layer.head_dim, layer.d_inner) == (4, 16, 64)
    assert Mamba2(d_model=C, n_head=4, head_dim=8).n_heads == 8  # head_dim sets the heads
    y, state = layer(torch.randn(2, T, C))
    assert y.shape == (2, T, C)
    assert state.conv.shape == (2, 64 + 2 * 2 * 8, 3) and state.ssm.shape == (2, 4, 16, 8)


@pytest.mark.parametrize("chunk", [4, 8, 5, 64])
def test_forward_equals_steps_with_the_state(chunk: int) -> None:
    layer = _layer(chunk_size=chunk)
    x = torch.randn(2, T, C, dtype=torch.float64)
    y, final = layer(x)
    state, steps = layer.init_state(2, x.device, x.dtype), []
    for t in range(T):
        y_t, state = layer(x[:, t : t + 1], state)
        steps.append(y_t)
    torch.testing.assert_close(torch.cat(steps, 1), y, atol=1e-5, rtol=0)
    torch.testing.assert_close(state.ssm, final.ssm, atol=1e-5, rtol=0)
    torch.testing.assert_close(state.conv, final.conv, atol=1e-12, rtol=0)


def test_prefill_then_steps_and_a_plain_tuple_state() -> None:
    """A prompt in one chunked call, the rest continued from its state (as a plain tuple, as the
    KV cache hands it back after reordering)."""
    layer = _layer()
    x = torch.randn(1, T, C, dtype=torch.float64)
    y, _ = layer(x)
    y1, state = layer(x[:, :9])
    y2, _ = layer(x[:, 9:], tuple(state))
    torch.testing.assert_close(torch.cat([y1, y2], 1), y, atol=1e-5, rtol=0)
    y0, _ = layer(x, layer.init_state(1, x.device, x.dtype))
    torch.testing.assert_close(y0, y, atol=0, rtol=0)


@pytest.mark.parametrize("n_groups", [1, 2])
def test_equals_transformers_mamba2_mixer(n_groups: int) -> None:
    """transformers' ``Mamba2Mixer`` in eval (its torch path), weights copied by name."""
    hf = pytest.importorskip("transformers.models.mamba2.modeling_mamba2")
    from transformers import Mamba2Config

    layer = _layer(torch.float32, n_groups=n_groups)
    config = Mamba2Config(
        hidden_size=C, num_heads=4, head_dim=16, expand=2, state_size=8, n_groups=n_groups,
        conv_kernel=4, chunk_size=8, num_hidden_layers=1, vocab_size=16, use_conv_bias=True,
        use_bias=False, layer_norm_epsilon=Mamba2.norm_eps,
    )  # fmt: skip
    theirs = hf.Mamba2Mixer(config, layer_idx=0).eval()
    missing = theirs.load_state_dict(layer.state_dict(), strict=True)
    assert not missing.missing_keys and not missing.unexpected_keys
    x = torch.randn(2, T, C)  # T = 21 > chunk 8, not a multiple
    with torch.no_grad():
        torch.testing.assert_close(layer(x)[0], theirs(x), atol=1e-4, rtol=0)


@pytest.mark.parametrize("seq_len", [1, 12, 16])
def test_forward_flops_equals_torch_counter(seq_len: int) -> None:
    """Matmuls and the conv, as FlopCounterMode counts them (elementwise work is not counted)."""
    layer = _layer(torch.float32)
    x = torch.randn(3, seq_len, C)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        layer(x)
    assert layer.forward_flops(3, seq_len) == counter.get_total_flops()


def test_builds_on_meta() -> None:
    with torch.device("meta"):
        layer = Mamba2(d_model=C, n_head=4)
    assert layer.A_log.is_meta


@pytest.mark.parametrize(
    ("params", "key"),
    [
        ({"chunk_size": 0}, "model.mixer.chunk_size=0"),
        ({"d_state": 0}, "model.mixer.d_state=0"),
        ({"d_conv": -1}, "model.mixer.d_conv=-1"),
        ({"expand": 1.5}, "model.mixer.expand=1.5"),
        ({"head_dim": 24}, "model.mixer.head_dim=24"),
        ({"n_groups": 3}, "model.mixer.n_groups=3"),
        ({"n_head": 3}, "model.n_head=3"),
    ],
)
def test_refusals_name_the_key(params: dict, key: str) -> None:
    kw = {"d_model": C, "n_head": 4} | params
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as err:
        Mamba2.check_args(**kw)
    assert "\n" not in str(err.value)


def test_check_args_accepts_the_defaults_and_context() -> None:
    Mamba2.check_args(d_model=C, n_head=4, n_layer=2, vocab_size=10)


def test_the_core_runs_without_autocast(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under bf16 autocast the projections run in bf16 but the core in float32 (its decays and
    sums lose too much in bf16): autocast is off inside it, and the output stays near the float32
    layer's."""
    seen = []
    core = ssd.ssd_chunked

    def spy(*args, **kwargs):
        seen.append(torch.is_autocast_enabled("cpu"))
        return core(*args, **kwargs)

    monkeypatch.setattr(ssd, "ssd_chunked", spy)
    layer = _layer(torch.float32)
    x = torch.randn(2, T, C)
    with torch.no_grad():
        y32, _ = layer(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y16, _ = layer(x)
    assert seen == [False, False]
    torch.testing.assert_close(y16.float(), y32, atol=0.05, rtol=0.05)
