"""``model/ffn=none``: a block without an FFN sublayer (Mamba-2's stack): no FFN norm, placement
or residual, 0 FFN parameters and FLOPs, every placement runs, and the size bound of a stored
config does not ask for FFN weights."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from src.models import build_model
from src.models.config import ModelConfig
from src.models.sizes import check_sizes_fit, weight_count
from tests.conftest import tiny_model_dict

NONE = {"name": "none"}


def ffn_free(**overrides) -> ModelConfig:
    return ModelConfig.from_dict(tiny_model_dict(ffn=NONE, **overrides))


def test_block_has_no_ffn_sublayer_and_no_parameters_for_it() -> None:
    torch.manual_seed(0)
    with_ffn = build_model(tiny_model_dict())
    torch.manual_seed(0)
    without = build_model(ffn_free())
    for block in without.decoder.blocks:
        assert not hasattr(block, "ffn_res") and not hasattr(block, "ffn_norm")
        assert len(block.sublayers()) == 1 and not list(block.ffn.parameters())
    ffn_params = sum(
        p.numel()
        for block in with_ffn.decoder.blocks
        for p in [*block.ffn.parameters(), *block.ffn_norm.parameters()]
    )
    assert without.num_parameters() == with_ffn.num_parameters() - ffn_params
    assert ffn_params == 2 * (2 * 32 * 64 + 64 + 32 + 2 * 32)  # two layers: MLP + LayerNorm


@pytest.mark.parametrize("placement", ["pre", "post", "sandwich", "rezero", "deepnorm"])
def test_every_placement_runs_and_flops_match_the_counter(placement: str) -> None:
    model = build_model(ffn_free(norm_placement=placement)).eval()
    ids = torch.randint(0, 97, (2, 16))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter, torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (2, 16, 97) and torch.isfinite(logits).all()
    assert model.forward_flops(2, 16) == counter.get_total_flops()


def test_the_stream_passes_the_ffn_untouched() -> None:
    """With pre-norm, a block is x + attn(norm(x)) and nothing after it."""
    model = build_model(ffn_free()).eval()
    block = model.decoder.blocks[0]
    x = torch.randn(1, 8, 32)
    positions = torch.arange(8)
    from src.models.components.attention import AttentionBias

    with torch.no_grad():
        out, _ = block(
            x, AttentionBias(is_causal=True), position=model.decoder.position, positions=positions
        )
        attn = block.attn(
            block.attn_norm(x),
            AttentionBias(is_causal=True),
            position=model.decoder.position,
            positions=positions,
        ).out
    torch.testing.assert_close(out, x + attn, atol=0, rtol=0)


def test_the_size_bound_counts_no_ffn_weights() -> None:
    """A stored FFN-free model with a large d_ff is not refused as a damaged config."""
    cfg = ffn_free(d_ff=4096)
    model = build_model(cfg)
    check_sizes_fit(cfg, weight_count(model.state_dict().values()), where="here")


def test_the_block_diagram_draws_no_ffn() -> None:
    from src.inspection.diagram import model_mermaid

    assert "FFN" not in model_mermaid(ffn_free())
    assert "FFN: GELU" in model_mermaid(ModelConfig.from_dict(tiny_model_dict()))


def test_a_pure_mamba2_stack_trains_under_fast_dev_run(tmp_path) -> None:
    """Mamba-2's own layout (Mamba2ForCausalLM): RMSNorm -> mamba2 -> residual, no FFN."""
    import json

    from src.training import runner
    from tests.training.conftest import TINY, compose_train

    cfg = compose_train(
        [
            *TINY,
            "trainer.fast_dev_run=true",
            "trainer.accelerator=cpu",
            "trainer.precision=32",
            "model/ffn=none",
            "model/norm=rmsnorm",
            "model/position=none",
            "model/mixer=mamba2",
            "model.mixer.d_state=8",
            "model.mixer.chunk_size=8",
        ],
        tmp_path,
    )
    runner.train(cfg)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["status"] == "completed" and metrics["global_step"] == 1, metrics
