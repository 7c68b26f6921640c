"""``python -m src.inspect`` on the variants of issue 13: T5-small's figures, the placements' own
norms and gates in the parameter table, and what each variant draws in the block diagram."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from hydra import compose, initialize_config_dir

from src.inspection.diagram import model_mermaid
from src.inspection.params import parameter_table
from src.models import ModelConfig, build_model
from tests.inspection.test_inspect import REPO, report


@pytest.fixture(scope="module", autouse=True)
def hydra_conf() -> Iterator[None]:
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        yield


def table(*overrides: str):
    with torch.device("meta"):
        return parameter_table(
            build_model(compose(config_name="inspect", overrides=list(overrides)).model)
        )


def test_t5_small_figures() -> None:
    """60,506,624 = 32,128 × 512 shared + per stack 32 × 8 bias buckets and a final norm; an encoder block
    has q, k, v, o 512 × 512 (8 × 64), wi 512 × 2048, wo 2048 × 512 and 2 norms; a decoder block adds
    cross-attention and a third norm."""
    t = table("model=t5_small")
    assert t.total == 60_506_624
    assert t.find("token embedding").params == 32128 * 512
    assert t.find("positions (t5_bias)").params == 32 * 8 and t.position_params == 2 * 32 * 8
    assert t.find("encoder blocks 0–5 (×6)").params == 6 * (
        4 * 512 * 512 + 2 * 512 * 2048 + 2 * 512
    )
    assert t.find("decoder blocks 0–5 (×6)").params == 6 * (
        8 * 512 * 512 + 2 * 512 * 2048 + 3 * 512
    )
    assert t.find("attention (8 heads × 64)").params == 4 * 512 * 512
    assert t.find("LM head").tied_to == "tok_embed"
    text = report(compose(config_name="inspect", overrides=["model=t5_small"]))
    assert "t5_small — encoder_decoder, from model=t5_small 60,506,624 parameters" in text
    assert "positions (t5_bias)" in text and "norms (rmsnorm ×3)" in text
    mermaid = report(compose(config_name="inspect", overrides=["model=t5_small", "format=mermaid"]))
    assert "T5 relative bias on scores" in mermaid and "input × d_model^-0.5" in mermaid
    assert "scores × 1 (not 1/√64)" in mermaid and "src_pos" not in mermaid


@pytest.mark.parametrize(
    ("placement", "norms", "extra_rows"),
    [
        ("pre", "norms (layernorm ×2)", []),
        ("sandwich", "norms (layernorm ×4)", []),
        ("deepnorm", "norms (layernorm ×2)", []),
        ("rezero", None, ["attn residual (rezero)", "ffn residual (rezero)"]),
    ],
)
def test_the_table_counts_each_placement(
    placement: str, norms: str | None, extra_rows: list[str]
) -> None:
    t = table("model=tiny", f"model.norm_placement={placement}")
    labels = [r.component for r in t.rows]
    assert (norms in labels) if norms else not any(x.startswith("norms (") for x in labels)
    for row in extra_rows:
        assert t.find(row).params == 1  # one gate α per sublayer
    assert ("final norm (layernorm)" in labels) == (placement in ("pre", "sandwich"))


def test_qk_norm_is_counted_with_its_attention() -> None:
    plain, qk = (
        table("model=tiny"),
        table("model=tiny", "model/qk_norm=rmsnorm", "model.qk_norm.scope=all"),
    )
    assert (
        qk.find("attention (4 heads × 16, QK-norm)").params
        == plain.find("attention").params + 2 * 64
    )


def test_each_variant_draws_what_it_does() -> None:
    sandwich = model_mermaid(ModelConfig(norm_placement="sandwich", n_layer=2))
    assert (
        "dec_attn --> dec_norm1b" in sandwich
        and "dec_norm1b --> dec_add1" in sandwich
        and "dec_final" in sandwich
    )
    assert 'subgraph dec["decoder block × 2 (sandwich norm)"]' in sandwich
    deepnorm = model_mermaid(ModelConfig(norm_placement="deepnorm", n_layer=2))
    assert "dec_in -.->|residual × α| dec_add1" in deepnorm and "dec_add1 --> dec_norm1" in deepnorm
    assert "dec_final" not in deepnorm and "(DeepNorm)" in deepnorm
    rezero = model_mermaid(ModelConfig(norm_placement="rezero", n_layer=2))
    assert (
        'dec_step1_1["× α (0 at init)"]' in rezero
        and "dec_norm" not in rezero
        and "dec_final" not in rezero
    )
    rope = model_mermaid(
        ModelConfig(
            position={"name": "rope", "scaling": {"name": "yarn", "factor": 4}},
            qk_norm={"name": "rmsnorm"},
        )
    )
    assert "RoPE rotates Q, K<br/>scaling: yarn ×4<br/>QK-norm: RMSNorm per head" in rope
    t5 = model_mermaid(
        ModelConfig(
            family="encoder_decoder",
            position={"name": "t5_bias"},
            qk_norm={"name": "layernorm", "scope": "all"},
        )
    )
    assert "T5 relative bias on scores" in t5 and "in_pos" not in t5 and "src_pos" not in t5
    assert t5.count("QK-norm: LayerNorm over all heads") == 3  # encoder self, decoder self, cross
