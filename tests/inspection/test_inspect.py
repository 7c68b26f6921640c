"""``python -m src.inspect``: parameter table, FLOPs, attention memory, Mermaid, dispatch."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig
from rich.console import Console

from src.inspect import main
from src.inspection.diagram import component_tree, model_mermaid
from src.inspection.model_report import run
from src.inspection.params import (
    attention_memory,
    dtype_bytes,
    flops_per_token,
    format_bytes,
    parameter_table,
)
from src.models import ModelConfig, build_model

REPO = Path(__file__).resolve().parents[2]
GPT2_FIGURES = ["124,439,808", "38,597,376", "786,432", "7,087,872", "1,536"]


@pytest.fixture(scope="module", autouse=True)
def hydra_conf() -> Iterator[None]:
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        yield


def inspect_cfg(*overrides: str) -> DictConfig:
    return compose(config_name="inspect", overrides=list(overrides))


def report(cfg: DictConfig) -> str:
    console = Console(record=True, width=200, file=io.StringIO())
    run(cfg, console)
    return console.export_text()


def meta_model(cfg: DictConfig | ModelConfig) -> torch.nn.Module:
    with torch.device("meta"):
        return build_model(cfg.model if isinstance(cfg, DictConfig) else cfg)


def test_report_prints_gpt2_small_figures() -> None:
    text = report(inspect_cfg())  # the default model is GPT-2 small, T = 1024, bf16
    for figure in GPT2_FIGURES:
        assert figure in text
    assert "24 MiB per layer, 288 MiB for 12 attention layers" in text
    assert "LM head (tied to tok_embed)" in text
    # training FLOPs per token: 3 × model.forward_flops(1, 1024) / 1024
    assert "854,438,400" in text


def test_parameter_table_rows_for_gpt2_small() -> None:
    table = parameter_table(meta_model(inspect_cfg()))
    assert table.total == 124_439_808
    assert table.find("token embedding").params == 38_597_376
    assert table.find("positions (learned)").params == 786_432
    group = table.find("decoder blocks 0–11 (×12)")
    assert group.kind == "group" and group.params == 12 * 7_087_872
    assert table.find("attention (12 heads × 64)").params == 2_362_368
    assert table.find("FFN (gelu)").params == 4_722_432
    assert table.find("norms (layernorm ×2)").params == 3_072
    assert table.find("block (each)").params == 7_087_872
    assert table.find("final norm").params == 1_536
    head = table.find("LM head")
    assert head.params == 0 and head.tied_to == "tok_embed"
    assert table.tied == {"head.weight": "tok_embed.weight"}
    assert table.position_params == 786_432


def test_expand_blocks_lists_each_block() -> None:
    cfg = inspect_cfg("model=tiny", "expand_blocks=true")
    table = parameter_table(meta_model(cfg), expand_blocks=True)
    assert [r.component for r in table.rows if r.kind == "group"] == [
        "decoder block 0",
        "decoder block 1",
    ]


def test_untied_llama_and_encoder_decoder_tables_add_up() -> None:
    llama = parameter_table(meta_model(inspect_cfg("model=llama_small", "model.n_layer=2")))
    assert llama.find("LM head").tied_to is None and llama.find("LM head").params == 50257 * 768
    assert llama.find("attention").component == "attention (12 heads × 64, 4 KV heads)"
    assert llama.position_params == 0
    t5ish = parameter_table(meta_model(inspect_cfg("model=transformer_base")))
    assert t5ish.find("cross-attention").params == 4 * (512 * 512 + 512)
    assert t5ish.find("encoder blocks").params + t5ish.find("decoder blocks").params > 0
    # The table refuses to print numbers that do not add up to the model's count.
    assert t5ish.total == sum(
        p.numel() for p in meta_model(inspect_cfg("model=transformer_base")).parameters()
    )


def test_flops_per_token_counts_every_matmul() -> None:
    model = meta_model(inspect_cfg())
    f = flops_per_token(model, 1024)
    C, L, T, V = 768, 12, 1024, 50257
    # per block qkv 3C², out C², up and down 4C² each; the tied head C·V
    weights = 2 * (L * 12 * C * C + C * V)
    attention = L * 4 * T * C  # Q·Kᵀ and P·V: 2 · 2·H·D·T per token and layer (H·D = C)
    assert (f.weights, f.attention, f.forward) == (weights, attention, weights + attention)
    assert (f.forward, f.training, f.seq_len) == (284_812_800, 3 * 284_812_800, 1024)
    # nanoGPT's estimate_mfu, 6N + 12·L·H·Q·T (N without the position table), also counts biases and norms as
    # matmul weights: it is within 0.1% of the count
    nanogpt = 6 * (124_439_808 - 786_432) + 12 * 12 * 12 * 64 * 1024
    assert nanogpt == 855_166_464 and abs(f.training / nanogpt - 1) < 1e-3


def test_attention_memory_article_figures() -> None:
    model = meta_model(inspect_cfg())
    mem = attention_memory(model, 1024, "bf16")
    assert mem.per_layer == 1 * 12 * 1024 * 1024 * 2 == 24 * 2**20
    assert mem.total == 288 * 2**20
    assert (format_bytes(mem.per_layer), format_bytes(mem.total)) == ("24 MiB", "288 MiB")
    assert attention_memory(model, 1024, "fp32", batch_size=8).total == 8 * 2 * 288 * 2**20
    assert dtype_bytes(torch.float16) == dtype_bytes("half") == 2
    with pytest.raises(ValueError, match="dtype 'int3' is not known"):
        dtype_bytes("int3")
    assert format_bytes(1536) == "1.5 KiB"


def test_report_overrides_seq_len_and_dtype() -> None:
    text = report(inspect_cfg("seq_len=2048", "dtype=fp32"))
    assert "192 MiB per layer, 2.2 GiB for 12 attention layers" in text  # 12·2048²·4 B; ×12


def test_pretrained_reads_config_json(tmp_path: Path) -> None:
    from transformers import GPT2Config

    GPT2Config(
        n_layer=2,
        n_embd=64,
        n_head=4,
        vocab_size=100,
        n_positions=32,
        bos_token_id=0,
        eos_token_id=0,
    ).save_pretrained(tmp_path)
    text = report(inspect_cfg(f"pretrained={tmp_path}"))
    block = 2 * 2 * 64 + (64 * 192 + 192) + (64 * 64 + 64) + (64 * 256 + 256) + (256 * 64 + 64)
    total = 100 * 64 + 32 * 64 + 2 * block + 2 * 64
    assert f"{total:,}" in text and f"{block:,}" in text
    assert f"pretrained={tmp_path}" in text
    assert "T=32" in text  # seq_len defaults to the checkpoint's n_positions


def test_unknown_format_raises() -> None:
    with pytest.raises(ValueError, match="format='svg' is not known; use one of: table, mermaid"):
        report(inspect_cfg("format=svg"))


def test_component_tree_collapses_blocks_and_marks_tie() -> None:
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(component_tree(meta_model(inspect_cfg())))
    text = console.export_text()
    assert "blocks.0–11 (×12): Block 7,087,872" in text
    assert "head: Linear 768→50257 38,597,376 (tied to tok_embed)" in text
    assert "position: LearnedPosition [learned] 786,432" in text


def test_mermaid_pre_norm_block() -> None:
    text = report(inspect_cfg("format=mermaid"))
    assert text.startswith("flowchart TD")
    for edge in [
        "in_tok --> in_posadd", "in_pos --> in_posadd",  # learned positions added to the embeddings
        "dec_in --> dec_norm1", "dec_norm1 --> dec_attn", "dec_attn --> dec_add1", "dec_in -.->|residual| dec_add1",
        "dec_add1 --> dec_norm2", "dec_norm2 --> dec_ffn", "dec_ffn --> dec_add2",
        "dec_add2 --> dec_final", "dec_final --> head",
    ]:  # fmt: skip
        assert edge in text, edge
    assert 'dec_attn["causal self-attention<br/>12 heads × 64"]' in text
    assert 'in_pos["learned positions<br/>1024 × 768"]' in text


def test_mermaid_post_norm_block() -> None:
    text = model_mermaid(ModelConfig(norm_placement="post", n_layer=6))
    for edge in [
        "dec_in --> dec_attn", "dec_attn --> dec_add1", "dec_add1 --> dec_norm1",
        "dec_norm1 --> dec_ffn", "dec_ffn --> dec_add2", "dec_add2 --> dec_norm2", "dec_norm2 --> head",
    ]:  # fmt: skip
        assert edge in text, edge
    # no final norm after post-norm
    assert "dec_in --> dec_norm1" not in text and "dec_final" not in text
    assert 'subgraph dec["decoder block × 6 (post-norm)"]' in text


def test_mermaid_cross_attention_and_position_kinds() -> None:
    seq2seq = model_mermaid(ModelConfig.from_dict(inspect_cfg("model=transformer_base").model))
    assert "memory -->|K, V| dec_cross" in seq2seq and "enc_norm2 --> memory" in seq2seq
    assert "dec_norm1 --> dec_cross" in seq2seq and "dec_norm2 --> dec_ffn" in seq2seq
    assert "sinusoidal positions" in seq2seq and "bidirectional self-attention" in seq2seq
    llama = model_mermaid(ModelConfig.from_dict(inspect_cfg("model=llama_small").model))
    assert "RoPE rotates Q, K" in llama and "4 KV heads (GQA)" in llama and "in_pos" not in llama
    assert "SwiGLU" in llama and "RMSNorm" in llama and "tied" not in llama
    alibi = model_mermaid(ModelConfig(position={"name": "alibi"}))
    assert "ALiBi bias on scores" in alibi
    bert = model_mermaid(ModelConfig.from_dict(inspect_cfg("model=bert_base").model))
    assert "in_posadd --> in_embnorm" in bert and "MLM transform" in bert


def test_unknown_subcommand_exits_with_the_list() -> None:
    with pytest.raises(SystemExit, match="unknown subcommand 'atention'; use one of: attention"):
        main(["atention", "model=tiny"])


def test_cli_subprocess_prints_gpt2_small_figures(tmp_path: Path) -> None:
    """The real command line, run from an empty directory: it prints and writes nothing there."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-m", "src.inspect", "model=gpt2_small"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    for figure in GPT2_FIGURES:
        assert figure in out.stdout
    assert "24 MiB per layer, 288 MiB" in out.stdout
    assert list(tmp_path.iterdir()) == []  # no outputs/, .hydra/ or inspect.log
