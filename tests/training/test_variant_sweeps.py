"""The variants of issue 13 through the real command line, each in a Hydra multirun under
``fast_dev_run`` (slow: one ``python -m src.train -m`` process per sweep).

* ``model.norm_placement=pre,post,sandwich,deepnorm,rezero`` on a decoder with the new YAMLs
  ``model/position=t5_bias``, ``model/qk_norm=rmsnorm`` and ``model/ffn=geglu``: five jobs, each
  completed, each with the parameter count its placement implies (counted by hand below);
* ``model=t5_small`` (shrunk) trained as a seq2seq model with each placement: DeepNorm's encoder
  and decoder constants, ReZero's gates and the bidirectional/causal T5 buckets on one objective;
* ``model.position.scaling`` = each RoPE scaling type in training, with ``model/qk_norm=layernorm``
  over all heads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.training.conftest import TINY, run_cli

pytestmark = pytest.mark.slow

FAST = [
    o
    for o in TINY
    if not o.startswith("trainer.max_steps")
    and not o.startswith("trainer.val_check_interval")
    and not o.startswith("trainer.limit_")
] + ["trainer.fast_dev_run=true"]
PLACEMENTS = ("pre", "post", "sandwich", "deepnorm", "rezero")
C, L = 32, 2  # TINY's d_model and n_layer
LN = 2 * C  # one LayerNorm: weight and bias (model=tiny is GPT-2-shaped: bias=true)


def sweep(tmp_path: Path, *overrides: str) -> list[tuple[dict, dict]]:
    """Run ``python -m src.train -m <overrides>``; each job's (metrics.json, resolved model config)."""
    out = tmp_path / "sweep"
    r = run_cli(["-m", *FAST, *overrides, f"hydra.sweep.dir={out}"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]

    def launch_order(
        job: Path,
    ) -> int:  # job folders are named by their overrides; Hydra records the job number
        return int(
            yaml.safe_load((job / ".hydra" / "hydra.yaml").read_text())["hydra"]["job"]["num"]
        )

    jobs = sorted(
        (p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")), key=launch_order
    )
    return [
        (
            json.loads((j / "metrics.json").read_text()),
            yaml.safe_load((j / ".hydra" / "config.yaml").read_text())["model"],
        )
        for j in jobs
    ]


def assert_completed(m: dict) -> None:
    assert m["status"] == "completed", m["error"]
    assert m["global_step"] == 1 and m["val/loss"] is not None and m["train/loss"] is not None


def test_placement_sweep_with_the_new_components(tmp_path: Path) -> None:
    jobs = sweep(
        tmp_path,
        f"model.norm_placement={','.join(PLACEMENTS)}",
        "model/position=t5_bias",
        "model/qk_norm=rmsnorm",
        "model/ffn=geglu",
    )
    assert [model["norm_placement"] for _, model in jobs] == list(PLACEMENTS)
    for m, model in jobs:
        assert_completed(m)
        assert (model["position"]["name"], model["qk_norm"]["name"], model["ffn"]["name"]) == (
            "t5_bias",
            "rmsnorm",
            "geglu",
        )
    params = {model["norm_placement"]: m["params"] for m, model in jobs}
    pre = params["pre"]  # 2 norms per block + a final norm
    assert params["post"] == params["deepnorm"] == pre - LN  # no final norm
    assert params["sandwich"] == pre + 2 * L * LN  # one more norm per sublayer
    # no norm at all, one gate α per sublayer
    assert params["rezero"] == pre - 2 * L * LN - LN + 2 * L


def test_t5_small_seq2seq_with_each_placement(tmp_path: Path) -> None:
    jobs = sweep(
        tmp_path,
        "model=t5_small",
        f"model.d_model={C}",
        "model.n_head=2",
        "model.d_head=16",
        "model.n_encoder_layer=2",
        "model.n_decoder_layer=2",
        "model.d_ff=64",
        "objective=seq2seq",
        f"model.norm_placement={','.join(PLACEMENTS)}",
    )
    assert [model["norm_placement"] for _, model in jobs] == list(PLACEMENTS)
    rms = C  # T5's RMS norm: a weight, no bias
    # per sublayer: 2 encoder blocks × 2, 2 decoder blocks × 3 (with cross-attention)
    norms = 2 * 2 + 2 * 3
    params = {}
    for m, model in jobs:
        assert_completed(m)
        assert (model["family"], model["position"]["name"]) == ("encoder_decoder", "t5_bias")
        params[model["norm_placement"]] = m["params"]
    pre = params["pre"]  # per-sublayer norms + a final norm per stack
    assert params["post"] == params["deepnorm"] == pre - 2 * rms
    assert params["sandwich"] == pre + norms * rms
    assert params["rezero"] == pre - norms * rms - 2 * rms + norms


def test_rope_scaling_sweep_in_training(tmp_path: Path) -> None:
    kinds = ("linear", "dynamic", "yarn", "llama3")
    nodes = ",".join(f"{{name:{k},factor:2}}" for k in kinds)
    jobs = sweep(
        tmp_path,
        "model/position=rope",
        f"model.position.scaling={nodes}",
        "model/qk_norm=layernorm",
        "model.qk_norm.scope=all",
        "model.norm_placement=sandwich",
    )
    assert [model["position"]["scaling"] for _, model in jobs] == [
        {"name": k, "factor": 2} for k in kinds
    ]
    for m, _ in jobs:
        assert_completed(m)
    assert len({m["params"] for m, _ in jobs}) == 1  # a scaling changes frequencies, not parameters
