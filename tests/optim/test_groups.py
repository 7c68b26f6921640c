"""Weight decay on matrices only, for every optimiser and family: never on norms, biases or embeddings."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from src.models import build_model
from src.optim import OPTIMIZERS, optimizer_config
from tests.conftest import tiny_model_dict

FAMILIES = ["decoder_only", "encoder_only", "encoder_decoder"]


def _decay_by_name(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, float]:
    names = {id(p): n for n, p in model.named_parameters()}
    out: dict[str, float] = {}
    for g in opt.param_groups:
        for p in g["params"]:
            assert names[id(p)] not in out, f"{names[id(p)]} is in two groups"
            out[names[id(p)]] = g["weight_decay"]
    return out


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    "name", OPTIMIZERS.names()
)  # read from the registry: one added stays covered
def test_decay_only_on_matrices(family: str, name: str) -> None:
    assert {"adamw", "muon", "lion", "schedulefree", "sgd"} <= set(OPTIMIZERS.names())
    model = build_model(
        tiny_model_dict(family=family, tie_embeddings=family != "encoder_decoder", bias=True)
    )
    opt = optimizer_config({"name": name, "lr": 1e-3, "weight_decay": 0.1}).build(
        model, torch.device("cpu")
    )
    decay = _decay_by_name(model, opt)
    assert set(decay) == {n for n, _ in model.named_parameters()}  # every trainable parameter, once
    embeddings = {f"{n}.weight" for n, m in model.named_modules() if isinstance(m, nn.Embedding)}
    for n, p in model.named_parameters():
        # biases, norm gains (and placement scalars), embedding tables
        if p.dim() < 2 or n in embeddings:
            assert decay[n] == 0.0, (name, n)
        else:
            assert decay[n] == 0.1, (
                name,
                n,
            )  # attention, FFN, an untied head, a family's head transform
    assert any(n.endswith("bias") for n in decay) and any("norm" in n for n in decay)


@pytest.mark.parametrize(
    ("name", "key", "accepted"),
    [
        (
            "muon",
            "decay_embeddings",
            "lr, momentum, nesterov, ns_steps, adjust_lr_fn, weight_decay, adamw_lr, betas, eps",
        ),
        ("lion", "eps", "lr, betas, weight_decay"),
        ("schedulefree", "fused", "lr, betas, eps, weight_decay, warmup_steps, r, weight_lr_power"),
        ("sgd", "betas", "lr, momentum, nesterov, weight_decay"),
    ],
)
def test_a_key_another_optimizer_has_is_refused(name: str, key: str, accepted: str) -> None:
    """Switching optim=adamw -> optim=<name> with an AdamW key left over names the key and what <name> takes."""
    from src.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        optimizer_config({"name": name, "lr": 1e-3, key: 1})
    assert f"optim.{key}=1 is not a key of optim={name}" in str(
        e.value
    ) and f"(accepted: {accepted})" in str(e.value)
