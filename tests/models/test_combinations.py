"""Every variant composes with every other: each family × placement × position (RoPE with each
scaling type, T5's bias), with the norms, FFNs and QK-norms rotated through them so every
(family, placement) pair meets each of those too. For each combination: the SDPA and explicit
attention paths agree, the loss is finite and reaches every parameter, and a left-to-right model's
cached steps equal its full forward."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch

from src.models import build_model
from src.models.components.kv_cache import KVCache
from tests.conftest import tiny_model_dict

FAMILIES = {
    "decoder_only": {},
    "encoder_only": {"family": "encoder_only"},
    "encoder_decoder": {
        "family": "encoder_decoder",
        "decoder_start_token_id": 1,
        "n_decoder_layer": 3,
    },
}
PLACEMENTS = ["pre", "post", "sandwich", "deepnorm", "rezero"]
POSITIONS: dict[str, dict[str, Any]] = {
    "learned": {"name": "learned"},
    "sinusoidal": {"name": "sinusoidal"},
    "rope": {"name": "rope"},
    "rope_linear": {"name": "rope", "scaling": {"name": "linear", "factor": 2.0}},
    "rope_dynamic": {"name": "rope", "scaling": {"name": "dynamic", "factor": 2.0}},
    "rope_yarn": {"name": "rope", "scaling": {"name": "yarn", "factor": 4.0}},
    "rope_llama3": {
        "name": "rope",
        "scaling": {"name": "llama3", "factor": 4.0, "original_max_seq_len": 16},
    },
    "alibi": {"name": "alibi"},
    "none": {"name": "none"},
    "t5_bias": {"name": "t5_bias", "num_buckets": 8, "max_distance": 10},
}
NORMS = [{"name": "layernorm"}, {"name": "rmsnorm"}]
FFNS = [{"name": "gelu"}, {"name": "relu"}, {"name": "silu"}, {"name": "swiglu"}, {"name": "geglu"}]
QK_NORMS = [{"name": "none"}, {"name": "rmsnorm"}, {"name": "layernorm", "scope": "all"}]

CASES = []
for family, placement in itertools.product(FAMILIES, PLACEMENTS):
    # 10 positions: each norm 5 times, each FFN twice, each QK-norm 3-4 times
    for i, position in enumerate(POSITIONS):
        CASES.append(
            (
                family,
                placement,
                position,
                NORMS[i % 2],
                FFNS[i % 5],
                QK_NORMS[i % 3],
                {"n_kv_head": 2} if i % 4 == 1 else {},
            )
        )


def config(
    family: str, placement: str, position: str, norm: dict, ffn: dict, qk_norm: dict, extra: dict
) -> dict:
    return tiny_model_dict(
        **FAMILIES[family],
        norm_placement=placement,
        position=POSITIONS[position],
        norm=norm,
        ffn=ffn,
        qk_norm=qk_norm,
        **extra,
    )


def test_the_grid_covers_every_value() -> None:
    for family, placement in itertools.product(FAMILIES, PLACEMENTS):
        rows = [c for c in CASES if c[:2] == (family, placement)]
        assert {c[2] for c in rows} == set(POSITIONS)
        for k, values in ((3, NORMS), (4, FFNS), (5, QK_NORMS)):
            assert [v for v in values if v not in [c[k] for c in rows]] == []


@pytest.mark.parametrize(
    "case",
    CASES,
    ids=[
        "-".join([c[0], c[1], c[2], c[3]["name"], c[4]["name"], "qk_" + c[5]["name"]])
        for c in CASES
    ],
)
def test_combination(case: tuple) -> None:
    torch.manual_seed(0)
    family = case[0]
    model = build_model(config(*case))
    # α = 0 makes every block the identity: open the gates so the blocks are tested
    if case[1] == "rezero":
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("_res.alpha"):
                    p.fill_(0.5)
    ids = torch.randint(2, 97, (2, 10))
    kw: dict[str, Any] = {}
    if family == "encoder_decoder":
        kw["decoder_input_ids"] = ids[:, :7]
    labels = kw.get("decoder_input_ids", ids)
    model.train()
    loss = model(ids, labels=labels, **kw).loss
    assert torch.isfinite(loss)
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert not missing, f"no gradient reaches {missing[:5]}"
    model.eval()
    with torch.no_grad():
        sdpa = model(ids, **kw).logits
        explicit = model(ids, output_attentions=True, **kw)
        torch.testing.assert_close(explicit.logits, sdpa, atol=1e-5, rtol=1e-5)
        assert explicit.attentions and all(torch.isfinite(a).all() for a in explicit.attentions)
        if family == "encoder_only":
            return
        steps, full = cached_steps(model, ids, kw), sdpa
        torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)


def cached_steps(model: torch.nn.Module, ids: torch.Tensor, kw: dict[str, Any]) -> torch.Tensor:
    """The logits of a prefill of 4 tokens then one token per step through the KV cache."""
    if "decoder_input_ids" in kw:
        memory, tgt = model.encode(ids), kw["decoder_input_ids"]
        cache = KVCache(len(model.decoder.blocks), max_length=tgt.shape[1])
        chunks = [tgt[:, :4]] + [tgt[:, t : t + 1] for t in range(4, tgt.shape[1])]
        return torch.cat(
            [
                model(encoder_hidden_states=memory, decoder_input_ids=c, cache=cache).logits
                for c in chunks
            ],
            1,
        )
    cache = KVCache(len(model.decoder.blocks))
    chunks = [ids[:, :5]] + [ids[:, t : t + 1] for t in range(5, ids.shape[1])]
    return torch.cat([model(c, cache=cache).logits for c in chunks], dim=1)
