"""The optimiser and schedule configs (typed, validated once), weight-decay groups and schedules."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from src.errors import ConfigError
from src.models import build_model
from src.optim import (
    OPTIMIZERS,
    SCHEDULES,
    AdamW,
    Constant,
    Cosine,
    NoSchedule,
    WarmupCosine,
    fused_devices,
    optimizer_config,
    param_groups,
    schedule_config,
)
from tests.conftest import tiny_model_dict

ADAMW = {
    "name": "adamw",
    "lr": 6e-4,
    "betas": [0.9, 0.95],
    "eps": 1e-8,
    "weight_decay": 0.1,
    "decay_embeddings": False,
    "fused": "auto",
}  # conf/optim/adamw.yaml


def refused(match: tuple[str, ...], fn, *args, **kwargs) -> str:
    """``fn`` raises ConfigError whose message contains every part of ``match`` (key, value, fix)."""
    with pytest.raises(ConfigError) as e:
        fn(*args, **kwargs)
    for part in match:
        assert part in str(e.value), (part, str(e.value))
    return str(e.value)


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
    # embedding tables (head is tied)
    assert "tok_embed.weight" in kept and any("position" in n for n in kept)
    assert any(n.endswith("bias") for n in kept) and any("norm" in n for n in kept)
    assert not any("embed" in n or "position" in n for n in decayed)
    n_total = sum(p.numel() for p in model.parameters())
    # each parameter once
    assert sum(p.numel() for g in (decay, no_decay) for p in g["params"]) == n_total
    with_emb, _ = param_groups(model, 0.1, decay_embeddings=True)
    assert {names[id(p)] for p in with_emb["params"]} >= decayed | {"tok_embed.weight"}


def test_untied_head_is_decayed() -> None:
    model = build_model(tiny_model_dict(tie_embeddings=False))
    decay, _ = param_groups(model, 0.1)
    assert any(p is model.head.weight for p in decay["params"])


def test_warmup_cosine_matches_nanogpt() -> None:
    lr, min_lr, warmup, decay = 1e-3, 1e-4, 100, 2000
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2, 2))], lr=lr)
    sched = Cosine(warmup_steps=warmup, decay_steps=decay, min_lr=min_lr).build(opt, lr, None)
    for it in range(2100):
        assert opt.param_groups[0]["lr"] == pytest.approx(
            nanogpt_get_lr(it, lr, warmup, decay, min_lr), rel=1e-9
        )
        opt.step()
        sched.step()


def test_constant_none_and_defaults() -> None:
    f = WarmupCosine(10, None, 1.0, cosine=False)
    assert f(0) == pytest.approx(1 / 11) and f(10) == 1.0 and f(10_000) == 1.0
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2, 2))], lr=1.0)
    assert schedule_config({"name": "none"}).build(opt, 1.0, 100) is None
    assert schedule_config({}) == NoSchedule()  # no scheduler node: none
    constant = schedule_config({"name": "constant", "warmup_steps": 10}).build(opt, 1.0, 100)
    assert constant.lr_lambdas[0](0) == pytest.approx(1 / 11) and constant.lr_lambdas[0](10) == 1.0
    cosine = schedule_config(
        {"name": "cosine", "warmup_steps": 0, "decay_steps": None, "min_lr": None}
    )
    cosine.check_run(1.0, 100)
    s = cosine.build(opt, 1.0, 100)
    # defaults
    assert s.lr_lambdas[0].decay_steps == 100 and s.lr_lambdas[0].min_ratio == pytest.approx(0.1)


def test_schedule_values_refused_naming_key_value_and_fix() -> None:
    refused(
        ("scheduler.name='linear'", "registered: cosine, constant, none"),
        schedule_config,
        {"name": "linear"},
    )
    refused(
        ("scheduler.warmup_steps=-1", "a number of optimizer steps, 0 or more"),
        schedule_config,
        {"name": "constant", "warmup_steps": -1},
    )
    refused(("scheduler.warmup_steps=1.5",), Cosine, warmup_steps=1.5)
    refused(("scheduler.decay_steps=0", "or null (= trainer.max_steps)"), Cosine, decay_steps=0)
    refused(("scheduler.min_lr=-0.1", "or null (= optim.lr / 10)"), Cosine, min_lr=-0.1)
    # the rules that need the run: one method, called once by the run validation
    for max_steps in (None, -1):
        refused(
            ("scheduler.decay_steps=None", "set scheduler.decay_steps, or trainer.max_steps"),
            Cosine().check_run,
            1.0,
            max_steps,
        )
    Cosine(decay_steps=10).check_run(1.0, None)  # its own horizon
    refused(
        ("scheduler.min_lr=2", "optim.lr=1.0", "or null (= optim.lr / 10)"),
        Cosine(min_lr=2).check_run,
        1.0,
        10,
    )
    Constant().check_run(1.0, None)
    NoSchedule().check_run(1.0, None)


def test_optim_values_refused_naming_key_value_and_fix() -> None:
    refused(
        ("optim.name='adagrad'", "registered: adamw"),
        optimizer_config,
        {**ADAMW, "name": "adagrad"},
    )
    for key, value, fix in (
        ("lr", -1, "a positive learning rate, e.g. optim.lr=6e-4"),
        ("lr", "abc", "a positive learning rate, e.g. optim.lr=6e-4"),
        ("lr", float("nan"), "a positive learning rate"),
        ("betas", [0.9], "two numbers in [0, 1), e.g. optim.betas=[0.9,0.95]"),
        ("betas", [0.9, 1.0], "two numbers in [0, 1)"),
        ("eps", 0, "a small positive number, e.g. optim.eps=1e-8"),
        ("weight_decay", -0.1, "0 or more, e.g. optim.weight_decay=0.1"),
        ("decay_embeddings", "yes", "true or false"),
        ("fused", "yes", "auto (the fused kernel"),
        ("fused", 1, "auto (the fused kernel"),
    ):  # 1 == True, but not a bool
        # the value as written
        refused((f"optim.{key}={value!r}", fix), optimizer_config, {**ADAMW, key: value})
    refused(("optim.lr", "is missing", "set optim.lr="), optimizer_config, {"name": "adamw"})


def test_unknown_keys_refused_listing_the_fields() -> None:
    """The dataclass is the one declaration of a group's keys (no conf/<group>/<name>.yaml read)."""
    msg = refused(
        ("optim.lrr=0.1", "optim=adamw", "fix the spelling or remove the override"),
        optimizer_config,
        {**ADAMW, "lrr": 0.1},
    )
    assert "(accepted: lr, betas, eps, weight_decay, decay_embeddings, fused)" in msg
    msg = refused(
        ("scheduler.warmup=5", "scheduler=cosine", "fix the spelling or remove the override"),
        schedule_config,
        {"name": "cosine", "warmup": 5},
    )
    assert "(accepted: warmup_steps, decay_steps, min_lr)" in msg
    refused(
        ("scheduler.warmup_steps=5", "scheduler=none", "(accepted: no keys)"),
        schedule_config,
        {"name": "none", "warmup_steps": 5},
    )


def test_configs_are_frozen_typed_and_match_the_yaml() -> None:
    """YAML lists become tuples; a built config cannot be changed afterwards; its fields are the
    keys of the conf/ files (name is the registry key, not a field)."""
    from omegaconf import OmegaConf

    from tests.conftest import CONF_DIR

    cfg = optimizer_config(ADAMW)
    assert cfg == AdamW(lr=6e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1) and cfg.betas == (
        0.9,
        0.95,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.lr = 1.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        schedule_config({"name": "cosine"}).warmup_steps = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        AdamW(6e-4)  # type: ignore[misc]  # keyword-only
    for group, registry in (("optim", OPTIMIZERS), ("scheduler", SCHEDULES)):
        for name in registry.names():
            yaml = OmegaConf.to_container(OmegaConf.load(CONF_DIR / group / f"{name}.yaml"))
            assert yaml.pop("name") == name
            assert list(yaml) == [f.name for f in dataclasses.fields(registry.get(name))], (
                group,
                name,
            )
            # the defaults are valid
            (optimizer_config if group == "optim" else schedule_config)({"name": name, **yaml})


def test_adamw_build_groups_and_hyperparameters() -> None:
    """AdamW.build: nanoGPT's two decay groups and the configured hyper-parameters, as before."""
    model = build_model(tiny_model_dict())
    opt = optimizer_config({**ADAMW, "fused": False}).build(model, torch.device("cpu"))
    expected = param_groups(model, 0.1)
    assert isinstance(opt, torch.optim.AdamW) and len(opt.param_groups) == 2
    for got, want in zip(opt.param_groups, expected):
        assert [id(p) for p in got["params"]] == [id(p) for p in want["params"]]
        assert got["weight_decay"] == want["weight_decay"]
        assert (got["lr"], got["betas"], got["eps"], got["fused"]) == (
            6e-4,
            (0.9, 0.95),
            1e-8,
            False,
        )
    assert opt.param_groups[0]["weight_decay"] == 0.1 and opt.param_groups[1]["weight_decay"] == 0.0
    emb = optimizer_config({**ADAMW, "decay_embeddings": True}).build(model, torch.device("cpu"))
    assert any(p is model.tok_embed.weight for p in emb.param_groups[0]["params"])


def test_fused_where_pytorch_has_the_kernel() -> None:
    """auto = PyTorch's fused AdamW on CPU too (one kernel, same update as the per-tensor loop);
    true on a device without one is refused; false keeps the loop."""
    model = build_model(tiny_model_dict())
    cfg = AdamW(lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1, fused="auto")
    cpu = torch.device("cpu")
    assert "cpu" in fused_devices()
    assert cfg.build(model, cpu).defaults["fused"]
    assert not dataclasses.replace(cfg, fused=False).build(model, cpu).defaults["fused"]
    refused(
        ("optim.fused=true", "meta", "set optim.fused=auto"),
        dataclasses.replace(cfg, fused=True).build,
        model,
        torch.device("meta"),
    )
    # Lightning refuses to clip a fused optimizer's gradients under mixed precision: auto takes the loop there
    assert not cfg.build(model, cpu, clips_under_mixed_precision=True).defaults["fused"]
    refused(
        (
            "optim.fused=true",
            "trainer.gradient_clip_val",
            "set optim.fused=auto or trainer.gradient_clip_val=null",
        ),
        dataclasses.replace(cfg, fused=True).build,
        model,
        cpu,
        clips_under_mixed_precision=True,
    )
    # the fused kernel and the loop take the same step
    twins = [build_model(tiny_model_dict()) for _ in range(2)]
    twins[1].load_state_dict(twins[0].state_dict())
    opts = [dataclasses.replace(cfg, fused=f).build(m, cpu) for m, f in zip(twins, (True, False))]
    ids = torch.randint(0, 32, (2, 9))
    for _ in range(3):
        for m, opt in zip(twins, opts):
            m(ids[:, :-1], labels=ids).loss.backward()
            opt.step()
            opt.zero_grad()
    for a, b in zip(*(m.parameters() for m in twins)):
        # rounding only: a step moves a weight ~1e-3
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
