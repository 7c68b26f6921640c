"""Probes on mixer layers: attention probes say why a layer has no map, the figures keep the
stack's layer numbers, and the logit lens and the ICL score read every layer."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from src.inspection.attention_maps import attention_maps, no_map_reasons
from src.models import build_model
from src.probes.batch import probe_batch
from src.probes.suite import run_probes
from tests.conftest import tiny_model_dict

LINEAR = {"name": "linear_attention", "chunk_size": 4}


def _model(**overrides: Any) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(tiny_model_dict(**overrides)).eval()


def test_hybrid_probes_number_layers_and_skip_the_mixer() -> None:
    model = _model(mixer=LINEAR, layer_mixers=["linear_attention", "attention"], n_layer=4)
    result = run_probes(model, probe_batch(model, batch_size=2, length=16, seed=0))
    assert set(result.skipped) >= {"attention@L0", "attention@L2"}
    assert "linear_attention" in result.skipped["attention@L0"]
    assert "attention@L1" not in result.skipped
    metrics = result.metrics()
    assert "probe/attn_entropy@L1" in metrics and "probe/attn_entropy@L3" in metrics
    assert "probe/attn_entropy@L0" not in metrics and "probe/induction@L3H0" in metrics
    assert len(result.lens_loss) == 4 and result.icl is not None
    assert torch.isfinite(torch.tensor(result.lens_loss)).all()


@pytest.mark.parametrize("mixer", [LINEAR, {"name": "short_conv"}])
def test_all_mixer_model_has_lens_and_icl_but_no_attention_figures(mixer: dict[str, Any]) -> None:
    model = _model(mixer=mixer, position={"name": "none"})
    result = run_probes(model, probe_batch(model, batch_size=2, length=16, seed=0))
    assert set(result.skipped) >= {"attention@L0", "attention@L1"}
    assert result.induction == [] and result.induction_max is None
    assert len(result.lens_loss) == 2 and result.icl is not None


def test_attention_maps_carry_the_stack_layer() -> None:
    model = _model(mixer=LINEAR, layer_mixers=["linear_attention", "attention"])
    maps = attention_maps(model, torch.randint(0, 97, (1, 8)))
    assert [m.layer for m in maps] == [1]
    assert no_map_reasons(model) == [
        "decoder layer 0: not applicable, linear_attention has no attention map"
    ]


def test_encoder_decoder_hybrid_maps() -> None:
    model = _model(
        family="encoder_decoder",
        mask=None,
        decoder_start_token_id=0,
        mixer=LINEAR,
        layer_mixers=["linear_attention", "attention"],
    )
    probs = model.attention_probs(torch.randint(0, 97, (1, 6)))
    assert [(a.kind, a.layer) for a in probs] == [
        ("encoder", 0),
        ("encoder", 1),
        ("decoder", 1),
        ("cross", 0),
        ("cross", 1),
    ]


def test_diagram_names_the_mixers() -> None:
    from src.inspection.diagram import model_mermaid
    from src.models.config import ModelConfig

    hybrid = model_mermaid(
        ModelConfig.from_dict(
            tiny_model_dict(mixer=LINEAR, layer_mixers=["linear_attention", "attention"])
        )
    )
    assert "linear attention (elu1) → attention" in hybrid and "self-attention" in hybrid
    only = model_mermaid(ModelConfig.from_dict(tiny_model_dict(mixer={"name": "short_conv"})))
    assert "token mixer: gated short convolution (kernel 4)" in only
    assert "self-attention" not in only.split("dec_attn")[1].split("\n")[0]


def test_parameter_table_and_memory_name_the_mixer() -> None:
    from src.inspection.params import attention_memory, parameter_table

    model = _model(mixer=LINEAR, position={"name": "none"})
    rows = [r.component for r in parameter_table(model, expand_blocks=True).rows]
    assert "mixer (linear attention (elu1))" in rows
    memory = attention_memory(model, 16)
    assert (memory.n_layers, memory.total) == (0, 0)
