"""Linear attention's three forms agree (float64, 1e-5), and the module's chunked forward equals
its token-by-token forward with the state (Katharopoulos et al. 2020)."""

from __future__ import annotations

import pytest
import torch

from src.errors import ConfigError
from src.models.mixers import linear_attention as la
from src.models.mixers.base import MIXERS


def _inputs(feature_map: str, T: int = 13, f: int = 4, D: int = 5) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 3, T, f, generator=g, dtype=torch.float64) for _ in range(2))
    v = torch.randn(2, 3, T, D, generator=g, dtype=torch.float64)
    return la.feature(q, feature_map), la.feature(k, feature_map), v


@pytest.mark.parametrize("feature_map", ["elu1", "identity", "taylor"])
@pytest.mark.parametrize("chunk_size", [1, 3, 4, 13, 32])
def test_chunked_equals_recurrent_equals_reference(feature_map: str, chunk_size: int) -> None:
    normalize = feature_map != "identity"
    q, k, v = _inputs(feature_map)
    B, H, T, Fp = q.shape
    zero = (torch.zeros(B, H, Fp, 5, dtype=q.dtype), torch.zeros(B, H, Fp, dtype=q.dtype))
    ref = la.reference(q, k, v, normalize)
    rec, (S_r, z_r) = la.recurrent(q, k, v, zero, normalize)
    chk, (S_c, z_c) = la.chunked(q, k, v, zero, chunk_size, normalize)
    torch.testing.assert_close(rec, ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(chk, ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(S_c, S_r, atol=1e-5, rtol=0)
    torch.testing.assert_close(z_c, z_r, atol=1e-5, rtol=0)


def test_taylor_map_approximates_exp() -> None:
    """φ(q)·φ(k) = 1 + s + s²/2 with s = q·k/√d (Based's second-order Taylor map)."""
    q, k = torch.randn(2, 7, 16, dtype=torch.float64).unbind(0)
    s = (q * k).sum(-1) / 4.0
    dot = (la.feature(q, "taylor") * la.feature(k, "taylor")).sum(-1)
    torch.testing.assert_close(dot, 1 + s + s**2 / 2)


@pytest.mark.parametrize("feature_map", ["elu1", "taylor"])
@pytest.mark.parametrize("chunk_size", [2, 5, 64])
def test_module_chunked_equals_steps(feature_map: str, chunk_size: int) -> None:
    torch.manual_seed(0)
    node = {"name": "linear_attention", "feature_map": feature_map, "chunk_size": chunk_size}
    mixer = MIXERS.build(node, d_model=16, n_head=2, bias=True).double()
    x = torch.randn(2, 11, 16, dtype=torch.float64)
    y, state = mixer(x)
    steps, s = [], None
    for t in range(11):
        out, s = mixer(x[:, t : t + 1], s)
        steps.append(out)
    torch.testing.assert_close(torch.cat(steps, 1), y, atol=1e-5, rtol=0)
    # a prefix's state continues the sequence
    y1, s1 = mixer(x[:, :6])
    y2, _ = mixer(x[:, 6:], s1)
    torch.testing.assert_close(torch.cat([y1, y2], 1), y, atol=1e-5, rtol=0)
    for a, b in zip(state, s, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    ("params", "key"),
    [
        ({"chunk_size": 0}, "model.mixer.chunk_size"),
        ({"feature_map": "relu"}, "model.mixer.feature_map"),
        ({"feature_dim": -1}, "model.mixer.feature_dim"),
        ({"feature_map": "identity"}, "model.mixer.normalize"),
    ],
)
def test_refusals(params: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        MIXERS.check({"name": "linear_attention", **params}, d_model=16, n_head=2)


def test_heads_must_divide() -> None:
    with pytest.raises(ConfigError, match=r"model\.n_head=3.*model\.d_model=16"):
        MIXERS.check({"name": "linear_attention"}, d_model=16, n_head=3)


def test_sums_run_in_float32_under_bf16_autocast() -> None:
    torch.manual_seed(0)
    mixer = MIXERS.build({"name": "linear_attention", "chunk_size": 4}, d_model=16, n_head=2)
    x = torch.randn(2, 10, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, (S, z) = mixer(x)
        steps, s = [], None
        for t in range(10):
            out, s = mixer(x[:, t : t + 1], s)
            steps.append(out)
    assert S.dtype == z.dtype == torch.float32 and y.dtype == torch.bfloat16
    torch.testing.assert_close(torch.cat(steps, 1), y, atol=2e-2, rtol=0)
    exact, _ = mixer(x)
    torch.testing.assert_close(y.float(), exact, atol=5e-2, rtol=0)
