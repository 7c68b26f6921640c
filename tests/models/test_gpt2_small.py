"""GPT-2 small, composed from conf/model/gpt2_small.yaml, is exactly GPT-2's 124,439,808 parameters.

The model is built on the meta device: the module tree and every parameter shape are the
real ones, but no memory is allocated and no weights are initialised (fast).
"""

from __future__ import annotations

from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

from src.models import build_model

GPT2_SMALL_TOTAL = 124_439_808
WTE = 50257 * 768  # 38,597,376
WPE = 1024 * 768  # 786,432
BLOCK = 7_087_872  # 2 LayerNorms (3,072) + attention (2,362,368) + MLP (4,722,432)
LN_F = 2 * 768  # 1,536


def n(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_gpt2_small_parameter_count(conf_dir: Path) -> None:
    with initialize_config_dir(config_dir=str(conf_dir), version_base=None):
        cfg = compose(config_name="inspect", overrides=["model=gpt2_small"])
    with torch.device("meta"):
        model = build_model(cfg.model)

    assert model.num_parameters() == GPT2_SMALL_TOTAL
    assert model.tok_embed.weight.numel() == WTE == 38_597_376
    assert n(model.decoder.position) == WPE == 786_432
    assert len(model.decoder.blocks) == 12
    for block in model.decoder.blocks:
        assert n(block) == BLOCK
        assert n(block.attn) == 768 * 3 * 768 + 3 * 768 + 768 * 768 + 768  # c_attn + c_proj
        assert n(block.ffn) == 768 * 3072 + 3072 + 3072 * 768 + 768  # c_fc + c_proj
        assert n(block.attn_norm) == n(block.ffn_norm) == 1_536
    assert n(model.decoder.final_norm) == LN_F == 1_536
    # The LM head is the token embedding (tied), so it adds no parameters.
    assert model.head.weight is model.tok_embed.weight
    assert model.head.bias is None
    assert WTE + WPE + 12 * BLOCK + LN_F == GPT2_SMALL_TOTAL
