"""Before-and-after oracle for restructurings: each family's logits and one AdamW step on a fixed
seed, and three tiny runs through ``src.train``'s pipeline, equal the figures recorded before the
typed-run-spec change (tests/training/golden_record.py computes them).

On the machine kind that recorded them (same torch, same CPU kernels) the figures must be equal bit
for bit; elsewhere a kernel may round differently, so they must agree to 1e-5.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from tests.training.golden_record import (
    MODEL_CASES,
    RUN_CASES,
    model_figures,
    run_figures,
)

RECORDED_ON = {"torch": "2.13.0+cpu", "cpu_capability": "AVX2"}

MODEL = {
    "decoder_only_gpt2": {
        "loss": 4.59273099899292,
        "logits_sum": 9.611772447584372,
        "logits_abs_sum": 279.73886056680203,
        "logit_0_0_0": -0.033568743616342545,
        "logit_1_last_last": 0.047007475048303604,
        "loss_after_step": 4.183011531829834,
        "params_sum_after_step": 156.66763742418328,
    },
    "decoder_only_rope_rmsnorm_swiglu": {
        "loss": 4.598661422729492,
        "logits_sum": 25.31414625402249,
        "logits_abs_sum": 296.4726440319646,
        "logit_0_0_0": 0.07514810562133789,
        "logit_1_last_last": -0.2829307019710541,
        "loss_after_step": 4.243317127227783,
        "params_sum_after_step": 165.7267084834166,
    },
    "decoder_only_alibi_post": {
        "loss": 4.586531639099121,
        "logits_sum": 17.987435602321057,
        "logits_abs_sum": 293.27727349178167,
        "logit_0_0_0": -0.12921243906021118,
        "logit_1_last_last": -0.17854052782058716,
        "loss_after_step": 4.17037296295166,
        "params_sum_after_step": 123.52939674785506,
    },
    "encoder_only": {
        "loss": 4.569664001464844,
        "logits_sum": -4.947627383378858,
        "logits_abs_sum": 277.372876338246,
        "logit_0_0_0": -0.09877479821443558,
        "logit_1_last_last": 0.06883573532104492,
        "loss_after_step": 4.2228240966796875,
        "params_sum_after_step": 190.09157094998977,
    },
    "encoder_decoder": {
        "loss": 4.583683967590332,
        "logits_sum": -12.311233929205628,
        "logits_abs_sum": 222.808880112294,
        "logit_0_0_0": -0.12847201526165009,
        "logit_1_last_last": -0.04943972826004028,
        "loss_after_step": 4.160449028015137,
        "params_sum_after_step": 388.1911680386113,
    },
}
RUNS = {
    "causal_lm": {"val/loss": 4.588131904602051, "test/loss": 4.585249900817871},
    "masked_lm": {"val/loss": 4.541557312011719, "test/loss": 4.585946083068848},
    "synthetic_encoder_decoder": {
        "val/loss": 2.441779136657715,
        "test/loss": 2.44510555267334,
    },
}


def _same_kernels() -> bool:
    return (
        torch.__version__ == RECORDED_ON["torch"]
        and torch.backends.cpu.get_cpu_capability() == RECORDED_ON["cpu_capability"]
    )


def _check(got: dict[str, float], want: dict[str, float]) -> None:
    assert got.keys() == want.keys()
    for key, value in want.items():
        if _same_kernels():
            assert got[key] == value, f"{key}: {got[key]!r} != recorded {value!r}"
        else:
            assert math.isclose(got[key], value, rel_tol=1e-5, abs_tol=1e-5), (
                key,
                got[key],
                value,
            )


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_logits_and_one_step_equal_the_recorded_figures(name: str) -> None:
    _check(model_figures(name), MODEL[name])


@pytest.mark.parametrize("name", sorted(RUN_CASES))
def test_a_tiny_run_through_the_pipeline_equals_the_recorded_figures(
    name: str, tmp_path: Path
) -> None:
    _check(run_figures(name, tmp_path), RUNS[name])
