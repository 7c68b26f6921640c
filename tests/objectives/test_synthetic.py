"""objective=synthetic (src/objectives/synthetic.py) on the synthetic data sources: the loss covers exactly the
answer in every family, greedy exact match, per-length test metrics (and "not applicable" past a learned
table), every task x family under fast_dev_run, and a 2-layer model that learns copy (slow)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch

from src.models.families.base import IGNORE_INDEX
from src.training import runner
from src.training.setup import build_run
from tests.training.conftest import compose_train

FAMILIES = {
    "decoder_only": [],
    "prefix_lm": ["model/mask=prefix_lm"],
    "encoder_decoder": ["model.family=encoder_decoder", "model.mask=null"],
}
OBJECTIVES = ("copy", "reverse", "sort", "addition", "induction", "mqar", "selective_copy")
#: a 2-layer, 32-dim model; small tasks; evaluation on 8 examples per set
SMALL = [
    "model=tiny",
    "model.d_model=32",
    "model.n_layer=2",
    "model.n_head=2",
    "model.d_ff=64",
    "model.max_seq_len=64",
    "model/position=rope",
    "trainer=cpu",
    "batch_size=4",
    "trainer.log_every_n_steps=1",
    "trainer.enable_progress_bar=false",
    "trainer.enable_model_summary=false",
    "callbacks.progress_bar=null",
    "scheduler.warmup_steps=1",
    "data.val_examples=8",
    "data.test_examples=8",
]


def run_for(tmp_path: Path, *overrides: str):
    cfg = compose_train([*SMALL, *overrides], tmp_path)
    return build_run(cfg)


def first_batch(run, split: str = "train") -> dict[str, torch.Tensor]:
    dm = run.datamodule
    dm.setup("fit")
    loader = dm.train_dataloader() if split == "train" else dm.test_dataloader()[0]
    return next(iter(loader))


@pytest.mark.parametrize("family", list(FAMILIES))
def test_loss_covers_exactly_the_answer(family: str, tmp_path: Path) -> None:
    run = run_for(tmp_path, "data=mqar", "data.num_pairs=4", *FAMILIES[family])
    batch = first_batch(run)
    src, answer = batch["src_ids"], batch["tgt_ids"]  # [B, P], [B, A]
    B, P = src.shape
    A = answer.shape[1]
    prep = run.task.prepare(batch)
    out = run.task.model(**prep.inputs, labels=prep.labels)
    # [B, T] aligned with the logits
    target = run.task.model.score_labels(prep.labels, out.logits.shape[1])
    scored = target != IGNORE_INDEX
    assert scored.sum(dim=1).tolist() == [A] * B
    assert torch.equal(target[scored].view(B, A), answer)
    if family == "encoder_decoder":
        assert torch.equal(prep.inputs["input_ids"], src) and out.logits.shape[1] == A
    else:  # one sequence: the answer is predicted from positions P-1 … P+A-2, nothing of the prompt is scored
        assert prep.inputs["input_ids"].shape[1] == P + A - 1
        assert scored[:, P - 1 :].all() and not scored[:, : P - 1].any()
        assert ("prefix_length" in prep.inputs) == (family == "prefix_lm")
        if family == "prefix_lm":
            assert prep.inputs["prefix_length"].tolist() == [P] * B
    # the loss is the mean cross-entropy of exactly those positions
    logits = out.logits.float()
    expected = torch.nn.functional.cross_entropy(logits[scored], target[scored])
    torch.testing.assert_close(out.loss.float(), expected)


class Oracle(pl.Callback):
    """Makes every answer right (the last token of odd rows wrong when ``half``) in the task's
    exact match."""

    def __init__(self, half: bool = False) -> None:
        self.half = half

    def on_test_start(self, trainer: pl.Trainer, pl_module) -> None:
        def answers_right(correct: torch.Tensor, scored: torch.Tensor) -> torch.Tensor:
            right = torch.ones(correct.shape[0], dtype=torch.bool)
            if self.half:
                right[1::2] = False
            return right

        pl_module.answers_right = answers_right


@pytest.mark.parametrize("half", [False, True])
def test_oracle_exact_match_and_every_length(half: bool, tmp_path: Path) -> None:
    run = run_for(
        tmp_path,
        "data=copy",
        "data.length=6",
        "data.test_lengths=[6,9,12]",
        "data.test_examples=8",
        "data.alphabet=5",
    )
    trainer = pl.Trainer(
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[Oracle(half)],
    )
    trainer.test(run.task, datamodule=run.datamodule, verbose=False)
    m = {k: float(v) for k, v in trainer.callback_metrics.items()}
    for n in (6, 9, 12):
        assert m[f"test/exact_match@{n}"] == (0.5 if half else 1.0)
        assert 0.0 <= m[f"test/token_acc@{n}"] <= 1.0 and m[f"test/loss@{n}"] > 0
    assert (
        m["test/exact_match"] == m["test/exact_match@6"]
        and m["test/token_acc"] == m["test/token_acc@6"]
    )
    assert m["test/loss"] == m["test/loss@6"]


def test_untrained_model_greedy_exact_match_is_real(tmp_path: Path) -> None:
    """Without the oracle the greedy decoder of an untrained model gets (almost) nothing right."""
    run = run_for(
        tmp_path, "data=copy", "data.length=8", "data.alphabet=8", "data.test_lengths=[8]"
    )
    batch = first_batch(run, "test")
    answers = run.task.greedy_answers(batch)
    assert answers.shape == batch["tgt_ids"].shape
    assert (answers == batch["tgt_ids"]).all(dim=1).float().mean() < 0.5


def test_learned_table_too_short_is_not_applicable(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    cfg = compose_train(
        [
            *SMALL,
            "model/position=learned",
            "model.max_seq_len=24",
            "data=copy",
            "data.length=8",
            "trainer.fast_dev_run=true",
        ],
        run_dir,
    )
    runner.train(cfg)
    m = json.loads((run_dir / "metrics.json").read_text())
    assert m["status"] == "completed", m["error"]
    # 17 tokens fit 24 rows
    assert m["test/exact_match@8"] is not None and m["test/token_acc@8"] is not None
    for n in (16, 32):  # 33 and 65 tokens do not
        assert m[f"test/exact_match@{n}"] is None and m[f"test/token_acc@{n}"] is None
    notes = json.loads((run_dir / "synthetic.json").read_text())["test"]
    assert notes["8"]["note"] is None
    assert notes["16"]["note"].startswith("not applicable") and "24 rows" in notes["16"]["note"]


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("task", OBJECTIVES)
def test_task_family_fast_dev_run(task: str, family: str, tmp_path: Path) -> None:
    """One task config for every family: only the model changes."""
    run_dir = tmp_path / "run"
    runner.train(
        compose_train(
            [*SMALL, f"data={task}", *FAMILIES[family], "trainer.fast_dev_run=true"], run_dir
        )
    )
    m = json.loads((run_dir / "metrics.json").read_text())
    assert m["status"] == "completed", m["error"]
    lengths = json.loads((run_dir / "synthetic.json").read_text())["test"]
    assert len(lengths) == 3
    for n in lengths:
        for name in ("exact_match", "token_acc"):
            assert m[f"test/{name}@{n}"] is not None and 0.0 <= m[f"test/{name}@{n}"] <= 1.0
    for key in ("val/loss", "test/loss", "val/exact_match", "test/exact_match", "test/token_acc"):
        assert m[key] is not None and math.isfinite(m[key]), key


@pytest.mark.slow
def test_two_layer_model_learns_copy(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    runner.train(
        compose_train(
            [
                *SMALL,
                "data=copy",
                "data.length=8",
                "data.alphabet=8",
                "data.test_lengths=[8]",
                "data.val_examples=64",
                "data.test_examples=128",
                "model.d_model=64",
                "model.n_head=4",
                "model.d_ff=256",
                "batch_size=32",
                "optim.lr=3e-3",
                "scheduler.warmup_steps=30",
                "trainer.max_steps=600",
                "trainer.val_check_interval=200",
                "cpu_threads=1",
            ],
            run_dir,
        )
    )
    m = json.loads((run_dir / "metrics.json").read_text())
    assert m["status"] == "completed", m["error"]
    assert m["test/exact_match"] >= 0.9, m["test/exact_match"]


@pytest.mark.parametrize(
    "overrides, fragments",
    [
        (["data=mqar", "data.num_pairs=40"], ["data.num_pairs=40", "at most data.num_keys=32"]),
        (["data=copy", "data.length=40"], ["block_size=64", "data.length=40", "at least 80"]),
        (["data=copy", "data.test_lengths=[8]"], ["data.test_lengths=8", "at least 16"]),
        (["data=copy", "tokenizer=gpt2"], ["data=copy", "tokenizer=char"]),
        (
            ["data=copy", "data.length=8", "data.train_min_length=9"],
            ["data.train_min_length=9", "from 1 to 8"],
        ),
        (["data=copy", "data.train_min_length=0"], ["data.train_min_length=0", "from 1 to 16"]),
        (
            ["data=induction", "data.length=32", "data.segment=8", "data.train_min_length=10"],
            ["data.train_min_length=10", "data.length=10", "2 x data.segment = 16"],
        ),
        (
            [
                "data=copy",
                "data.length=8",
                "model/position=learned",
                "model.max_seq_len=24",
                "block_size=40",
            ],
            ["block_size=40", "model.max_seq_len=24"],
        ),
    ],
)
def test_bad_input_is_refused_when_the_run_is_validated(
    overrides: list[str], fragments: list[str], tmp_path: Path
) -> None:
    from src.config.validate import validate_run_config

    with pytest.raises(ValueError) as e:  # DataError / ConfigError, both ValueErrors
        validate_run_config(compose_train([*SMALL, *overrides], tmp_path))
    for fragment in fragments:
        assert fragment in str(e.value)


def test_train_min_length_draws_every_size_per_batch(tmp_path: Path) -> None:
    """``data.train_min_length``: each training batch is at one size from that range (uniform, a pure
    function of the seed and the batch index, so a resumed run sees the same batches); its answers are
    its prompts'; validation and test stay at their sizes; null keeps every batch at the training size."""
    from src.data.synthetic.datamodule import TrainBatches

    run = run_for(
        tmp_path,
        "data=copy",
        "data.length=8",
        "data.alphabet=5",
        "data.train_min_length=2",
        "data.test_lengths=[8,16]",
    )
    dm = run.datamodule
    dm.setup("fit")
    make = TrainBatches(dm.source, dm.ids, 4, seed=0, rank=0, world_size=1, min_length=2)
    sizes = [make.length(i) for i in range(400)]
    assert set(sizes) == set(range(2, 9))  # every size, none outside
    # ~uniform
    assert max(sizes.count(n) for n in range(2, 9)) < 2.2 * min(sizes.count(n) for n in range(2, 9))
    for i in (0, 1, 7):
        batch, n = make(i), make.length(i)
        assert batch["src_ids"].shape == (4, n + 1) and batch["tgt_ids"].shape == (
            4,
            n,
        )  # prompt = string + separator
        assert (batch["length"] == n).all()
        # copy: the answer is the string
        assert torch.equal(batch["src_ids"][:, :n], batch["tgt_ids"])
        assert torch.equal(batch["src_ids"], make(i)["src_ids"])  # a pure function of the index
    other_rank = TrainBatches(dm.source, dm.ids, 4, seed=0, rank=1, world_size=2, min_length=2)
    # ranks agree on each batch's shape
    assert [other_rank.length(i) for i in range(50)] == sizes[:50]
    loader_sizes = {first_batch(run)["tgt_ids"].shape[1]}
    assert loader_sizes <= set(range(2, 9))
    assert next(iter(dm.val_dataloader()))["tgt_ids"].shape[1] == 8
    assert [next(iter(t))["tgt_ids"].shape[1] for t in dm.test_dataloader()] == [8, 16]
    fixed = run_for(tmp_path / "fixed", "data=copy", "data.length=8", "data.alphabet=5")
    fixed.datamodule.setup("fit")
    plain = TrainBatches(
        fixed.datamodule.source, fixed.datamodule.ids, 4, seed=0, rank=0, world_size=1
    )
    assert {plain.length(i) for i in range(50)} == {8} and plain(3)["tgt_ids"].shape == (4, 8)


def test_train_min_length_trains_end_to_end_and_counts_the_tokens_it_read(tmp_path: Path) -> None:
    """A run over batches of several sizes completes, and ``tokens_seen`` is the tokens of the batches
    it read (decoder-only: prompt + answer - 1 per example), not the training size's."""
    from src.data.synthetic.datamodule import TrainBatches

    run_dir = tmp_path / "run"
    steps = 6
    runner.train(
        compose_train(
            [
                *SMALL,
                "data=copy",
                "data.length=8",
                "data.alphabet=5",
                "data.train_min_length=2",
                f"trainer.max_steps={steps}",
                "trainer.val_check_interval=3",
            ],
            run_dir,
        )
    )
    m = json.loads((run_dir / "metrics.json").read_text())
    assert m["status"] == "completed", m["error"]
    dm = run_for(tmp_path / "same", "data=copy", "data.length=8", "data.alphabet=5").datamodule
    sizes = [
        TrainBatches(dm.source, {}, 4, seed=dm.seed, rank=0, world_size=1, min_length=2).length(i)
        for i in range(steps)
    ]
    assert len(set(sizes)) > 1
    # B x (P + A - 1), P = n + 1 (the separator), A = n
    assert m["tokens_seen"] == sum(4 * 2 * n for n in sizes)
    assert m["tokens_seen"] < steps * 4 * (2 * 8)
    assert math.isfinite(m["test/exact_match@8"])
