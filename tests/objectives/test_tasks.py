"""Each objective on its family: a few steps on one repeated batch bring the loss down;
label construction (shift, prefix, masking, concatenated pairs) checked by hand; mismatches
of task, family and data fail at build time."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from src.config.spec import vocabulary
from src.data.tokenizers import CharTokenizer
from src.errors import ConfigError
from src.models.families.base import IGNORE_INDEX
from src.objectives import OBJECTIVES
from src.objectives.decoder_translation import concat_pairs
from tests.conftest import tiny_model_dict

V = 40  # tokenizer vocabulary of the synthetic batches
TOK = CharTokenizer("".join(chr(ord("0") + i) for i in range(V)))


def plain_cfg(task: dict[str, Any], **model: Any) -> dict[str, Any]:
    return {
        "seed": 0,
        "model": tiny_model_dict(vocab_size=V + 1, **model),  # room for one reserved id
        "objective": task,
        "optim": {
            "name": "adamw",
            "lr": 3e-3,
            "betas": [0.9, 0.99],
            "weight_decay": 0.0,
            "fused": "auto",
        },
        "scheduler": {"name": "none"},
        "trainer": {"max_steps": 30},
    }


def text_batch(B: int = 4, T: int = 16) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"tokens": torch.randint(0, V, (B, T + 1), generator=g)}


def pair_batch(B: int = 4, S: int = 7, T: int = 6) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    src_len = torch.tensor([S, S - 2, 3, S - 1])[:B]
    tgt_len = torch.tensor([T, 2, T - 1, 4])[:B]
    src_mask = (torch.arange(S)[None] < src_len[:, None]).long()
    tgt_mask = (torch.arange(T)[None] < tgt_len[:, None]).long()
    pad, eos = 0, 1
    src = torch.randint(2, V, (B, S), generator=g).masked_fill(src_mask == 0, pad)
    tgt = torch.randint(2, V, (B, T), generator=g).masked_fill(tgt_mask == 0, pad)
    tgt[torch.arange(B), tgt_len - 1] = eos
    return {"src_ids": src, "src_mask": src_mask, "tgt_ids": tgt, "tgt_mask": tgt_mask}


def overfit(
    task_name: str,
    objective_cfg: dict[str, Any],
    batch: dict[str, torch.Tensor],
    steps: int = 20,
    **model: Any,
) -> list[float]:
    cls = OBJECTIVES.get(task_name)
    cfg = plain_cfg({"name": task_name, **objective_cfg}, **model)
    cfg["objective"].update(cls.special_ids(cfg["objective"], TOK, cfg["model"]).ids)
    task = cls(cfg, TOK.state_dict())
    opt = task.configure_optimizers()
    torch.manual_seed(0)
    losses = []
    for _ in range(steps):
        if task_name == "masked_lm":  # the same masked positions every step: a truly repeated batch
            task._generator = torch.Generator().manual_seed(0)
        loss = task.shared_step(batch)[0]
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize(
    "task_name, objective_cfg, batch, model",
    [
        ("causal_lm", {"prefix_length": None}, "text", {}),
        ("causal_lm", {"prefix_length": 6}, "text", {"mask": {"name": "prefix_lm"}}),
        (
            "masked_lm",
            {"mask_prob": 0.3, "replace_mask": 0.8, "replace_random": 0.1, "mask_token_id": None},
            "text",
            {"family": "encoder_only", "norm_placement": "post", "embedding_norm": True},
        ),
        (
            "seq2seq",
            {"split": 0.5, "decoder_start_token_id": None},
            "text",
            {"family": "encoder_decoder"},
        ),
        (
            "seq2seq",
            {"split": 0.5, "decoder_start_token_id": None},
            "pairs",
            {"family": "encoder_decoder", "pad_token_id": 0},
        ),
        ("decoder_translation", {"sep_token_id": None}, "pairs", {}),
        ("decoder_translation", {"sep_token_id": None}, "pairs", {"mask": {"name": "prefix_lm"}}),
    ],
    ids=[
        "causal",
        "prefix_lm",
        "masked_lm",
        "seq2seq_text",
        "seq2seq_pairs",
        "decoder_translation",
        "dec_trans_prefix",
    ],
)
def test_each_family_learns_a_repeated_batch(
    task_name: str, objective_cfg: dict, batch: str, model: dict
) -> None:
    losses = overfit(
        task_name, objective_cfg, text_batch() if batch == "text" else pair_batch(), **model
    )
    assert losses[-1] < 0.6 * losses[0], losses


def test_causal_targets_are_next_tokens_and_prefix_is_unscored() -> None:
    cls = OBJECTIVES.get("causal_lm")
    tokens = torch.arange(10)[None]  # [1, 10]
    task = cls(plain_cfg({"name": "causal_lm", "prefix_length": None}), TOK.state_dict())
    prep = task.prepare({"tokens": tokens})
    # the family aligns the labels with the 9 logit positions
    targets = task.model.score_labels(prep.labels, 9)
    assert torch.equal(prep.inputs["input_ids"], tokens[:, :-1]) and torch.equal(
        targets, tokens[:, 1:]
    )
    task = cls(
        plain_cfg({"name": "causal_lm", "prefix_length": 4}, mask={"name": "prefix_lm"}),
        TOK.state_dict(),
    )
    prep = task.prepare({"tokens": tokens})
    # positions 0..3 see the whole prefix (tokens 0..3); predicting tokens 1..3 would read them
    assert task.model.score_labels(prep.labels, 9).tolist() == [
        [IGNORE_INDEX] * 3 + list(range(4, 10))
    ]
    assert prep.inputs["prefix_length"].tolist() == [4]


def test_masked_lm_selection_and_80_10_10() -> None:
    cls = OBJECTIVES.get("masked_lm")
    cfg = plain_cfg(
        {
            "name": "masked_lm",
            "mask_prob": 0.15,
            "replace_mask": 0.8,
            "replace_random": 0.1,
            "mask_token_id": None,
        },
        family="encoder_only",
    )
    ids = cls.special_ids(cfg["objective"], TOK, cfg["model"])
    # char has no [MASK]: reserved after the vocab
    assert ids.ids == {"mask_token_id": V} and ids.n_reserved == 1
    cfg["objective"].update(ids.ids)
    task = cls(cfg, TOK.state_dict())
    torch.manual_seed(0)
    tokens = torch.randint(0, V, (64, 513))
    prep = task.prepare({"tokens": tokens})
    x, y, orig = prep.inputs["input_ids"], prep.labels, tokens[:, :-1]
    sel = y != IGNORE_INDEX
    assert sel.float().mean().item() == pytest.approx(0.15, abs=0.01)
    assert torch.equal(y[sel], orig[sel])  # labels are the original tokens, no shift
    assert torch.equal(x[~sel], orig[~sel])  # unselected tokens untouched
    masked = (x[sel] == V).float().mean().item()
    kept = (x[sel] == orig[sel]).float().mean().item()
    assert masked == pytest.approx(0.8, abs=0.02) and kept == pytest.approx(0.1 + 0.1 / V, abs=0.02)
    assert int(x.max()) <= V  # random replacements never use reserved ids beyond [MASK]


def test_concat_pairs_layout() -> None:
    src = torch.tensor([[5, 6, 7], [8, 0, 0]])
    src_mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    tgt = torch.tensor([[9, 1], [10, 11]])  # 1 = eos
    tgt_mask = torch.tensor([[1, 1], [1, 1]])
    seq, labels, prefix = concat_pairs(src, src_mask, tgt, tgt_mask, sep_id=3, pad_id=0)
    assert seq.tolist() == [[5, 6, 7, 3, 9, 1], [8, 3, 10, 11, 0, 0]]
    assert labels.tolist() == [[-100, -100, -100, -100, 9, 1], [-100, -100, 10, 11, -100, -100]]
    assert prefix.tolist() == [4, 2]


def test_seq2seq_teacher_forcing_inputs() -> None:
    cls = OBJECTIVES.get("seq2seq")
    cfg = plain_cfg(
        {"name": "seq2seq", "split": 0.5, "decoder_start_token_id": 2},
        family="encoder_decoder",
        pad_token_id=0,
    )
    task = cls(cfg, TOK.state_dict())
    b = {
        "src_ids": torch.tensor([[5, 6]]),
        "src_mask": torch.tensor([[1, 1]]),
        "tgt_ids": torch.tensor([[7, 1, 0]]),
        "tgt_mask": torch.tensor([[1, 1, 0]]),
    }
    prep = task.prepare(b)
    # the decoder's teacher-forced inputs
    assert task.model.shift_right(prep.labels).tolist() == [[2, 7, 1]]
    assert prep.labels.tolist() == [[7, 1, -100]]
    prep = task.prepare({"tokens": torch.arange(10)[None]})
    assert prep.inputs["input_ids"].tolist() == [[0, 1, 2, 3, 4]] and prep.labels.tolist() == [
        [5, 6, 7, 8, 9]
    ]
    assert task.model.shift_right(prep.labels).tolist() == [[2, 5, 6, 7, 8]]


@pytest.mark.parametrize(
    "task_name, family, match",
    [
        (
            "masked_lm",
            "decoder_only",
            "objective=masked_lm needs model.family in \\['encoder_only'\\]",
        ),
        (
            "causal_lm",
            "encoder_only",
            "objective=causal_lm needs model.family in \\['decoder_only'\\]",
        ),
        (
            "seq2seq",
            "encoder_only",
            "objective=seq2seq needs model.family in \\['encoder_decoder'\\]",
        ),
        ("decoder_translation", "encoder_only", "needs model.family in \\['decoder_only'\\]"),
    ],
)
def test_task_family_mismatch_is_a_build_error(task_name: str, family: str, match: str) -> None:
    cfg = plain_cfg(
        {"name": task_name, "mask_token_id": 3, "decoder_start_token_id": 2, "sep_token_id": 3},
        family=family,
    )
    with pytest.raises(ConfigError, match=match):
        OBJECTIVES.get(task_name)(cfg, TOK.state_dict())


def test_batch_format_mismatch() -> None:
    with pytest.raises(ConfigError, match="translation pairs fit objective=seq2seq"):
        OBJECTIVES.get("causal_lm").check_batch_format("pairs", "data=multi30k")
    with pytest.raises(
        ConfigError, match="cannot train on data=embedded, which yields text batches"
    ):
        OBJECTIVES.get("decoder_translation").check_batch_format("text", "data=embedded")


def test_prefix_length_needs_prefix_mask() -> None:
    with pytest.raises(ConfigError, match="objective.prefix_length=4 needs model/mask=prefix_lm"):
        OBJECTIVES.get("causal_lm")(
            plain_cfg({"name": "causal_lm", "prefix_length": 4}), TOK.state_dict()
        )
    with pytest.raises(ConfigError, match="model/mask=prefix_lm needs objective.prefix_length"):
        OBJECTIVES.get("causal_lm")(
            plain_cfg({"name": "causal_lm", "prefix_length": None}, mask={"name": "prefix_lm"}),
            None,
        )


def test_vocab_follows_tokenizer_or_must_fit() -> None:
    cfg = plain_cfg({"name": "causal_lm"}) | {"vocab_size_from": "tokenizer"}
    cfg["model"]["vocab_size"] = 50257
    keys = vocabulary(cfg, TOK, n_reserved=1)
    assert keys["vocab_size"] == V + 1 and keys["eos_token_id"] is None
    assert cfg["model"]["vocab_size"] == 50257  # the plain config is not changed
    cfg = plain_cfg({"name": "causal_lm"}) | {"vocab_size_from": "model"}
    cfg["model"]["vocab_size"] = 20
    with pytest.raises(
        ConfigError,
        match=f"tokenizer=char has {V} tokens, more than model.vocab_size=20; "
        f"raise model.vocab_size to at least {V}",
    ):
        vocabulary(cfg, TOK, n_reserved=0)
