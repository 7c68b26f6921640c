"""optim=lion: our Lion's steps equal the lion-pytorch package's, with the decay groups."""

from __future__ import annotations

import copy

import pytest
import torch
from lion_pytorch import Lion as ReferenceLion

from src.errors import ConfigError
from src.models import build_model
from src.optim import optimizer_config, param_groups
from src.optim.lion import Lion
from tests.conftest import tiny_model_dict


def test_steps_equal_lion_pytorch() -> None:
    torch.manual_seed(0)
    ours = build_model(tiny_model_dict(tie_embeddings=False))
    ref = copy.deepcopy(ours)
    opt = optimizer_config(
        {"name": "lion", "lr": 3e-4, "betas": [0.9, 0.99], "weight_decay": 1.0}
    ).build(ours, torch.device("cpu"))
    assert isinstance(opt, Lion)
    ref_opt = ReferenceLion(param_groups(ref, 1.0), lr=3e-4, betas=(0.9, 0.99))
    start = [p.detach().clone() for p in ours.parameters()]
    for seed in range(5):
        ids = torch.randint(0, 97, (2, 16), generator=torch.Generator().manual_seed(seed))
        for model, o in ((ours, opt), (ref, ref_opt)):
            o.zero_grad()
            model(ids, labels=ids).loss.backward()
            o.step()
    for (name, a), b in zip(ours.named_parameters(), ref.parameters()):
        assert torch.equal(a, b), name
    assert all(not torch.equal(a, s) for a, s in zip(ours.parameters(), start))
    decayed = {id(p) for p in opt.param_groups[0]["params"]}
    assert opt.param_groups[0]["weight_decay"] == 1.0 and opt.param_groups[1]["weight_decay"] == 0.0
    assert id(ours.tok_embed.weight) not in decayed and id(ours.head.weight) in decayed


def test_each_entry_moves_by_lr() -> None:
    """Lion's update is a sign: without weight decay every entry with a gradient moves by exactly lr."""
    p = torch.nn.Parameter(torch.zeros(3, 4))
    opt = Lion([p], lr=0.01)
    p.grad = torch.randn(3, 4)
    opt.step()
    assert torch.allclose(p.abs(), torch.full((3, 4), 0.01))


def test_values_refused() -> None:
    for key, value in (("betas", [0.9, 1.0]), ("weight_decay", -1), ("lr", 0)):
        with pytest.raises(ConfigError) as e:
            optimizer_config({"name": "lion", key: value, **({} if key == "lr" else {"lr": 1e-4})})
        assert f"optim.{key}={value!r}" in str(e.value)
