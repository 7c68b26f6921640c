"""Weight-decay groups and learning-rate schedules."""
from __future__ import annotations

import math

import pytest
import torch

from src.models import build_model
from src.optim import WarmupCosine, build_optimizer, build_scheduler, fused_devices, param_groups
from tests.conftest import tiny_model_dict


def nanogpt_get_lr(it: int, lr: float, warmup: int, decay: int, min_lr: float) -> float:
    """karpathy/nanoGPT train.py get_lr, verbatim logic."""
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay:
        return min_lr
    ratio = (it - warmup) / (decay - warmup)
    coeff = 0.5 * (1.0 + math.cos(math.pi * ratio))
    return min_lr + coeff * (lr - min_lr)


def test_decay_only_matrices_not_embeddings_norms_biases() -> None:
    model = build_model(tiny_model_dict())  # tied head
    decay, no_decay = param_groups(model, 0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    kept = {names[id(p)] for p in no_decay["params"]}
    assert decayed and all(p.dim() >= 2 for p in decay["params"])
    assert "tok_embed.weight" in kept and any("position" in n for n in kept)  # embedding tables (head is tied)
    assert any(n.endswith("bias") for n in kept) and any("norm" in n for n in kept)
    assert not any("embed" in n or "position" in n for n in decayed)
    n_total = sum(p.numel() for p in model.parameters())
    assert sum(p.numel() for g in (decay, no_decay) for p in g["params"]) == n_total  # each parameter once
    with_emb, _ = param_groups(model, 0.1, decay_embeddings=True)
    assert {names[id(p)] for p in with_emb["params"]} >= decayed | {"tok_embed.weight"}


def test_untied_head_is_decayed() -> None:
    model = build_model(tiny_model_dict(tie_embeddings=False))
    decay, _ = param_groups(model, 0.1)
    assert any(p is model.head.weight for p in decay["params"])


def test_warmup_cosine_matches_nanogpt() -> None:
    lr, min_lr, warmup, decay = 1e-3, 1e-4, 100, 2000
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2, 2))], lr=lr)
    sched = build_scheduler(opt, {"name": "cosine", "warmup_steps": warmup, "decay_steps": decay, "min_lr": min_lr}, lr, None)
    for it in range(2100):
        assert opt.param_groups[0]["lr"] == pytest.approx(nanogpt_get_lr(it, lr, warmup, decay, min_lr), rel=1e-9)
        opt.step()
        sched.step()


def test_constant_none_and_defaults() -> None:
    f = WarmupCosine(10, None, 1.0, cosine=False)
    assert f(0) == pytest.approx(1 / 11) and f(10) == 1.0 and f(10_000) == 1.0
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2, 2))], lr=1.0)
    assert build_scheduler(opt, {"name": "none"}, 1.0, 100) is None
    s = build_scheduler(opt, {"name": "cosine", "warmup_steps": 0, "decay_steps": None, "min_lr": None}, 1.0, 100)
    assert s.lr_lambdas[0].decay_steps == 100 and s.lr_lambdas[0].min_ratio == pytest.approx(0.1)  # defaults
    with pytest.raises(ValueError, match="scheduler.decay_steps"):
        build_scheduler(opt, {"name": "cosine", "decay_steps": None}, 1.0, None)
    with pytest.raises(ValueError, match="scheduler.name='linear' is not known"):
        build_scheduler(opt, {"name": "linear"}, 1.0, 100)


def test_fused_where_pytorch_has_the_kernel() -> None:
    """auto = PyTorch's fused AdamW on CPU too (one kernel, same update as the per-tensor loop);
    true on a device without one is refused; false keeps the loop."""
    model = build_model(tiny_model_dict())
    cfg = {"lr": 1e-3, "betas": [0.9, 0.95], "weight_decay": 0.1, "fused": "auto"}
    assert "cpu" in fused_devices()
    assert build_optimizer(model, cfg, torch.device("cpu")).defaults["fused"]
    assert not build_optimizer(model, {**cfg, "fused": False}, torch.device("cpu")).defaults["fused"]
    with pytest.raises(ValueError, match="optim.fused=true needs a device with PyTorch's fused AdamW"):
        build_optimizer(model, {**cfg, "fused": True}, torch.device("meta"))
    # Lightning refuses to clip a fused optimizer's gradients under mixed precision: auto takes the loop there
    assert not build_optimizer(model, cfg, torch.device("cpu"), clips_under_mixed_precision=True).defaults["fused"]
    with pytest.raises(ValueError, match="optim.fused=true cannot be combined with gradient clipping under mixed"):
        build_optimizer(model, {**cfg, "fused": True}, torch.device("cpu"), clips_under_mixed_precision=True)
    # the fused kernel and the loop take the same step
    twins = [build_model(tiny_model_dict()) for _ in range(2)]
    twins[1].load_state_dict(twins[0].state_dict())
    opts = [build_optimizer(m, {**cfg, "fused": f}, torch.device("cpu")) for m, f in zip(twins, (True, False))]
    ids = torch.randint(0, 32, (2, 9))
    for _ in range(3):
        for m, opt in zip(twins, opts):
            m(ids[:, :-1], labels=ids).loss.backward()
            opt.step()
            opt.zero_grad()
    for a, b in zip(*(m.parameters() for m in twins)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)  # rounding only: a step moves a weight ~1e-3
