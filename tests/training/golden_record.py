"""The figures that ``test_golden_values.py`` holds fixed: each family's logits and one optimizer
step on a fixed seed, and a few tiny runs through ``src.train``'s pipeline.

A restructuring of the config, the builder or the training setup must leave every figure
unchanged. ``python -m tests.training.golden_record`` prints them, to paste into
``test_golden_values.py`` when a change is *meant* to alter the numbers (say so in the commit).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import torch

from tests.conftest import tiny_model_dict

#: the model-level cases: one per family, and decoder-only variants that take other code paths
MODEL_CASES: dict[str, dict[str, Any]] = {
    "decoder_only_gpt2": tiny_model_dict(),
    "decoder_only_rope_rmsnorm_swiglu": tiny_model_dict(
        position={"name": "rope"},
        norm={"name": "rmsnorm", "eps": 1e-5},
        ffn={"name": "swiglu"},
    ),
    "decoder_only_alibi_post": tiny_model_dict(position={"name": "alibi"}, norm_placement="post"),
    "encoder_only": tiny_model_dict(family="encoder_only", mask=None),
    "encoder_decoder": tiny_model_dict(
        family="encoder_decoder",
        mask=None,
        position={"name": "sinusoidal"},
        decoder_start_token_id=0,
    ),
}

#: the pipeline cases: overrides of conf/train.yaml (beside tests/training/conftest.py's TINY)
RUN_CASES: dict[str, list[str]] = {
    "causal_lm": [],
    "masked_lm": ["objective=masked_lm", "model.family=encoder_only", "model.mask=null"],
    "synthetic_encoder_decoder": [
        "data=copy",
        "data.length=6",
        "data.val_examples=8",
        "data.test_examples=8",
        "data.test_lengths=[6]",
        "model.family=encoder_decoder",
        "model.mask=null",
        "model/position=sinusoidal",
    ],
}

RUN_METRICS = ("val/loss", "test/loss")


def model_figures(name: str) -> dict[str, float]:
    """Logits, loss and the loss after one AdamW step of ``MODEL_CASES[name]``, seed 0."""
    from src.models.builder import build_model

    torch.manual_seed(0)
    model = build_model(MODEL_CASES[name])
    model.train(False)  # dropout is 0; eval mode keeps the figure free of any train-only path
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 97, (2, 16), generator=g)  # [B, T]
    inputs: dict[str, torch.Tensor] = {"input_ids": ids, "labels": ids}
    if name == "encoder_decoder":
        inputs["labels"] = torch.randint(0, 97, (2, 12), generator=g)  # [B, T_tgt]
    out = model(**inputs)
    figures = {
        "loss": out.loss.item(),
        "logits_sum": out.logits.double().sum().item(),
        "logits_abs_sum": out.logits.double().abs().sum().item(),
        "logit_0_0_0": out.logits[0, 0, 0].item(),
        "logit_1_last_last": out.logits[1, -1, -1].item(),
    }
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    out.loss.backward()
    opt.step()
    figures["loss_after_step"] = model(**inputs).loss.item()
    figures["params_sum_after_step"] = sum(p.double().sum().item() for p in model.parameters())
    return figures


def run_figures(name: str, tmp: Path) -> dict[str, float]:
    """val/loss and test/loss of a 4-step tiny run through ``src.training.runner.train``."""
    from tests.training.conftest import TINY, train_in_process

    run_dir = tmp / name
    train_in_process([*TINY, "seed=3", *RUN_CASES[name]], run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return {key: float(metrics[key]) for key in RUN_METRICS}


def main() -> None:
    torch.set_num_threads(1)
    print("MODEL = {")
    for name in MODEL_CASES:
        print(f"    {name!r}: {model_figures(name)!r},")
    print("}")
    with tempfile.TemporaryDirectory() as tmp:
        print("RUNS = {")
        for name in RUN_CASES:
            print(f"    {name!r}: {run_figures(name, Path(tmp))!r},")
        print("}")


if __name__ == "__main__":
    main()
