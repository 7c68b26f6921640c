"""optim=muon: PyTorch's Muon on the model's hidden matrices, AdamW on the rest, as one optimiser
whose state, scheduler and resume behave as one."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from src.errors import ConfigError
from src.models import build_model
from src.optim import optimizer_config, param_groups, schedule_config
from src.optim.muon import MuonWithAdamW
from tests.conftest import tiny_model_dict

MUON = {
    "name": "muon",
    "lr": 6e-4,
    "momentum": 0.95,
    "nesterov": True,
    "ns_steps": 5,
    "adjust_lr_fn": "match_rms_adamw",
    "weight_decay": 0.1,
    "adamw_lr": None,
    "betas": [0.9, 0.95],
    "eps": 1e-8,
}


def _loss_step(model: nn.Module, opt: torch.optim.Optimizer, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 97, (2, 16), generator=g)
    opt.zero_grad()
    model(ids, labels=ids).loss.backward()
    opt.step()


@pytest.mark.parametrize("adjust", ["match_rms_adamw", "original"])
def test_matrices_step_as_torch_muon_and_the_rest_as_adamw(adjust: str) -> None:
    """Three steps of optim=muon equal torch.optim.Muon on the hidden matrices plus torch.optim.AdamW
    (nanoGPT's groups) on everything else, bit for bit."""
    torch.manual_seed(0)
    ours = build_model(tiny_model_dict())
    ref = copy.deepcopy(ours)
    opt = optimizer_config({**MUON, "adjust_lr_fn": adjust}).build(ours, torch.device("cpu"))
    hidden = ref.hidden_matrices()
    ref_muon = torch.optim.Muon(
        hidden,
        lr=6e-4,
        weight_decay=0.1,
        momentum=0.95,
        nesterov=True,
        ns_steps=5,
        adjust_lr_fn=adjust,
    )
    groups = param_groups(ref, 0.1, exclude=hidden)
    ref_adamw = torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    for seed in range(3):
        _loss_step(ours, opt, seed)
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, 97, (2, 16), generator=g)
        ref_muon.zero_grad()
        ref_adamw.zero_grad()
        ref(ids, labels=ids).loss.backward()
        ref_muon.step()
        ref_adamw.step()
    before = build_model(tiny_model_dict())  # a fresh init: the steps moved the weights
    for (name, a), (_, b) in zip(ours.named_parameters(), ref.named_parameters()):
        assert torch.equal(a, b), name
    assert any(not torch.equal(a, c) for a, c in zip(ours.parameters(), before.parameters()))


def test_one_matrix_update_equals_torch_muon() -> None:
    """The update of one hidden matrix is torch.optim.Muon's on that matrix alone."""
    torch.manual_seed(1)
    model = build_model(tiny_model_dict())
    opt = optimizer_config(MUON).build(model, torch.device("cpu"))
    w = model.hidden_matrices()[0]
    alone = nn.Parameter(w.detach().clone())
    ref = torch.optim.Muon([alone], lr=6e-4, weight_decay=0.1, adjust_lr_fn="match_rms_adamw")
    ids = torch.randint(0, 97, (2, 16))
    model(ids, labels=ids).loss.backward()
    alone.grad = w.grad.clone()
    opt.step()
    ref.step()
    assert torch.equal(w, alone) and not torch.equal(w, w.grad)


@pytest.mark.parametrize("family", ["decoder_only", "encoder_only", "encoder_decoder"])
def test_hidden_matrices_are_the_attention_and_ffn_weights(family: str) -> None:
    model = build_model(tiny_model_dict(family=family, position={"name": "rope"}))
    names = {id(p): n for n, p in model.named_parameters()}
    hidden = [names[id(p)] for p in model.hidden_matrices()]
    linear = [
        f"{n}.weight"
        for n, m in model.named_modules()
        if isinstance(m, nn.Linear)
        and (".attn." in f"{n}." or ".cross_attn." in f"{n}." or ".ffn." in f"{n}.")
    ]
    assert sorted(hidden) == sorted(linear) and hidden
    assert all(p.dim() == 2 for p in model.hidden_matrices())
    assert not any(
        "embed" in n or "norm" in n or n.startswith("head") or "transform" in n for n in hidden
    )
    opt = optimizer_config(MUON).build(model, torch.device("cpu"))
    muon_ids = {id(p) for g in opt.muon.param_groups for p in g["params"]}
    assert muon_ids == {id(p) for p in model.hidden_matrices()}
    adamw = [(names[id(p)], g["weight_decay"]) for g in opt.adamw.param_groups for p in g["params"]]
    assert len(muon_ids) + len(adamw) == len(list(model.parameters()))  # every parameter, once
    for name, wd in adamw:
        if "embed" in name or "norm" in name or name.endswith("bias") or "position" in name:
            assert wd == 0.0, name


def test_no_hidden_matrices_is_refused() -> None:
    with pytest.raises(ConfigError) as e:
        optimizer_config(MUON).build(nn.Sequential(nn.Linear(4, 4)), torch.device("cpu"))
    assert (
        "optim=muon" in str(e.value)
        and "hidden matrices" in str(e.value)
        and "optim=adamw" in str(e.value)
    )
    for key, value in (
        ("momentum", 1.0),
        ("ns_steps", 0),
        ("adjust_lr_fn", "rms"),
        ("adamw_lr", -1),
    ):
        with pytest.raises(ConfigError) as e:
            optimizer_config({**MUON, key: value})
        assert f"optim.{key}={value!r}" in str(e.value)


def test_scheduler_scales_every_group_and_a_reload_continues() -> None:
    """The lr scheduler scales the Muon and the AdamW groups; state_dict/load_state_dict (a checkpoint
    and a resume) give the same next steps as an optimiser that was never saved."""
    torch.manual_seed(2)
    model = build_model(tiny_model_dict())
    twin = copy.deepcopy(model)
    sched_cfg = schedule_config(
        {"name": "cosine", "warmup_steps": 2, "decay_steps": 10, "min_lr": 0.0}
    )
    opt = optimizer_config(MUON).build(model, torch.device("cpu"))
    sched = sched_cfg.build(opt, 6e-4, 10)
    for seed in range(3):
        _loss_step(model, opt, seed)
        sched.step()
    assert {g["lr"] for g in opt.muon.param_groups + opt.adamw.param_groups} == {
        opt.param_groups[0]["lr"]
    }
    assert opt.param_groups[0]["lr"] == pytest.approx(6e-4 * sched.lr_lambdas[0](3))
    saved_opt, saved_sched = copy.deepcopy(opt.state_dict()), copy.deepcopy(sched.state_dict())
    twin.load_state_dict(model.state_dict())
    opt2 = optimizer_config(MUON).build(twin, torch.device("cpu"))
    sched2 = sched_cfg.build(opt2, 6e-4, 10)
    opt2.load_state_dict(saved_opt)
    sched2.load_state_dict(saved_sched)
    assert (
        isinstance(opt2, MuonWithAdamW)
        and opt2.muon.state is opt2.state
        and opt2.adamw.param_groups[0] is opt2.param_groups[len(opt2.muon.param_groups)]
    )
    for seed in range(3, 6):
        _loss_step(model, opt, seed)
        sched.step()
        _loss_step(twin, opt2, seed)
        sched2.step()
    for a, b in zip(model.parameters(), twin.parameters()):
        assert torch.equal(a, b)
