"""The synthetic tasks' exact match, read from the teacher-forced forward
(``SyntheticTask.answers_right``), is what greedy decoding token by token gives
(``greedy_answers``: the KV or state cache, ``src.models.generation.generate``), for every family,
position scheme and a recurrent mixer, on models trained until some answers are right and some
are wrong, at the training length and at the longer test lengths.

Row by row: greedy decoding agrees with the true answer up to its first wrong token, and that
token is the teacher-forced argmax at that position (the induction the identity rests on)."""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch

from src.objectives.base import IGNORE_INDEX
from tests.objectives.test_synthetic import run_for

CASES = {
    "decoder_only rope": [],
    "decoder_only alibi": ["model/position=alibi"],
    "decoder_only learned": ["model/position=learned"],
    "decoder_only t5_bias": ["model/position=t5_bias"],
    "prefix_lm": ["model/mask=prefix_lm"],
    "encoder_decoder": ["model.family=encoder_decoder", "model.mask=null"],
    "gated_deltanet": ["model/mixer=gated_deltanet", "model/position=none"],
}


@pytest.mark.parametrize("case", list(CASES))
def test_exact_match_from_the_forward_is_greedy_decodings(case: str, tmp_path: Path) -> None:
    run = run_for(
        tmp_path,
        "data=copy",
        "data.length=5",
        "data.alphabet=4",
        "data.test_lengths=[5,10]",
        "data.test_examples=64",
        "optim.lr=3e-3",
        *CASES[case],
    )
    torch.manual_seed(0)
    pl.Trainer(
        accelerator="cpu",
        max_steps=120,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    ).fit(run.task, datamodule=run.datamodule)
    task, model = run.task, run.task.model
    model.eval()
    first_wrong: list[int] = []
    for loader in run.datamodule.test_dataloader():
        for batch in loader:
            tgt = batch["tgt_ids"]  # [B, A]
            B, A = tgt.shape
            with torch.no_grad():
                loss, correct, scored, prep = task.shared_step(batch)
                out = model(**prep.inputs, labels=prep.labels)
            target = model.score_labels(prep.labels, out.logits.shape[1])  # [B, T]
            forced = out.logits.argmax(-1)[target != IGNORE_INDEX].view(B, A)  # [B, A]
            greedy = task.greedy_answers(batch)  # [B, A]
            exact = task.answers_right(correct, scored)  # [B]
            assert torch.equal(exact, (greedy == tgt).all(dim=1))
            for b in range(B):
                wrong = (greedy[b] != tgt[b]).nonzero()
                k = int(wrong[0]) if len(wrong) else A
                first_wrong.append(k)
                assert torch.equal(forced[b, :k], tgt[b, :k])
                if k < A:
                    assert forced[b, k] == greedy[b, k]
    # not vacuous: answers wrong from their first token and answers right for 3 tokens or more
    assert min(first_wrong) == 0 and max(first_wrong) >= 3, sorted(set(first_wrong))
    assert len(set(first_wrong)) >= 3, sorted(set(first_wrong))
