"""Every attention pattern of issue 59 (sliding window, per-layer masks, soft-caps, sinks,
differential attention, document masking) trains under ``fast_dev_run`` in each family that
supports it, and its checkpoint reloads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from src.checkpoints.load import load_checkpoint
from tests.training.conftest import TINY, run_cli, train_in_process

WINDOW = ["model/mask=sliding_window", "model.mask.window=8"]
GEMMA2 = [*WINDOW, "model.layer_masks=[sliding_window,causal]"]
CAPS = ["model.attn_softcap=50.0", "model.final_softcap=30.0"]
SINK = ["model/sinks=learned"]
TOKENS = ["model/sinks=token", "model.sinks.count=2"]
DIFF = ["model/attention=differential"]
FAST = ["trainer.fast_dev_run=true", "trainer.accelerator=cpu", "trainer.precision=32"]

PATTERNS = {
    "decoder_sliding_window": WINDOW,
    "decoder_gemma2_caps": [*GEMMA2, *CAPS, "model/position=rope"],
    "decoder_gemma3": [
        *WINDOW,
        "model.n_layer=6",
        "model.layer_masks=" + "[" + "sliding_window," * 5 + "causal]",
    ],
    "prefix_lm_with_local_layers": [
        *WINDOW,
        "model.layer_masks=[sliding_window,prefix_lm]",
        "objective.prefix_length=8",
    ],
    "encoder_local_layers_caps": [
        "objective=masked_lm",
        "model.family=encoder_only",
        *WINDOW,
        "model.layer_masks=[sliding_window,bidirectional]",
        *CAPS,
    ],
    "decoder_learned_sink_window": [*SINK, *WINDOW],
    "prefix_lm_learned_sink": [*SINK, "model/mask=prefix_lm", "objective.prefix_length=8"],
    "encoder_learned_sink": [
        *SINK,
        "objective=masked_lm",
        "model.family=encoder_only",
        "model/mask=bidirectional",
    ],
    "decoder_sink_tokens_window": [*TOKENS, *WINDOW, "model/position=rope"],
    "prefix_lm_sink_tokens": [*TOKENS, "model/mask=prefix_lm", "objective.prefix_length=8"],
    "encoder_registers": [
        *TOKENS,
        "objective=masked_lm",
        "model.family=encoder_only",
        "model/mask=bidirectional",
    ],
    "decoder_differential_gemma2": [*DIFF, *GEMMA2, "model/position=rope"],
    "prefix_lm_differential_sink": [
        *DIFF,
        *SINK,
        "model/mask=prefix_lm",
        "objective.prefix_length=8",
    ],
    "encoder_differential": [
        *DIFF,
        "objective=masked_lm",
        "model.family=encoder_only",
        "model/mask=bidirectional",
    ],
    "encoder_decoder_differential": [
        "model=transformer_base",
        "model.n_encoder_layer=1",
        "model.n_decoder_layer=1",
        "objective=seq2seq",
        *DIFF,
    ],
    "decoder_document_mask": ["data.document_mask=true", "tokenizer=gpt2"],
    "decoder_document_mask_window_rope": [
        "data.document_mask=true",
        "tokenizer=gpt2",
        *WINDOW,
        "model/position=rope",
    ],
    "decoder_document_mask_alibi": [
        "data.document_mask=true",
        "tokenizer=gpt2",
        "model/position=alibi",
    ],
    "encoder_decoder_caps": [
        "model=transformer_base",
        "model.n_encoder_layer=1",
        "model.n_decoder_layer=1",
        "objective=seq2seq",
        *CAPS,
    ],
}


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_pattern_trains_under_fast_dev_run(name: str, tmp_path: Path) -> None:
    train_in_process([*TINY, *FAST, *PATTERNS[name]], tmp_path)
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["status"] == "completed", m["error"]
    assert m["global_step"] == 1


@pytest.mark.slow
def test_quickstart_gemma2_pattern_from_the_command_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    r = run_cli(
        [
            "experiment=quickstart",
            *FAST,
            *GEMMA2,
            *CAPS,
            "trainer.fast_dev_run=false",
            "trainer.max_steps=2",
            "trainer.val_check_interval=2",
            "trainer.limit_val_batches=1",
            "trainer.limit_test_batches=1",
            "callbacks.sample_text.max_new_tokens=80",  # past the window: the rolling cache
            f"hydra.run.dir={run_dir}",
        ],
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    loaded = load_checkpoint(run_dir / "checkpoints" / "last.ckpt")
    c = loaded.model.config
    assert (c.mask, c.layer_masks) == ({"name": "sliding_window", "window": 8}, GEMMA2_NAMES)
    assert (c.attn_softcap, c.final_softcap) == (50.0, 30.0)
    ids = torch.tensor([loaded.tokenizer.encode("def f(x):")])
    assert loaded.model(ids).logits.abs().max() <= 30.0
    assert len((run_dir / "samples.txt").read_text()) > 40


GEMMA2_NAMES = ["sliding_window", "causal"]
