"""Resume through Lightning itself: ``fit(ckpt_path=...)`` continues on the exact next batch.

Lightning 2.x stores the train loader's ``state_dict()`` in the checkpoint and restores it
before iterating; this proves the batches after a resume equal those of an uninterrupted
iteration, for endless epochs (Lightning fetches one batch ahead) and sized ones (it does not),
including a checkpoint at an epoch boundary.
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from src.data.datamodule import build_datamodule
from src.data.tokenizers import build_tokenizer


class Recorder(L.LightningModule):
    """The smallest trainable module; remembers every training batch it sees."""

    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(vocab_size, 4)
        self.seen: list[torch.Tensor] = []

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        self.seen.append(batch["tokens"].clone())
        return self.emb(batch["tokens"]).pow(2).mean()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def datamodule(cache_dir: str, epoch_batches: int | None):
    tok = build_tokenizer({"name": "char"})
    dm = build_datamodule(
        {"name": "embedded", "cache_dir": cache_dir, "epoch_batches": epoch_batches},
        tok,
        block_size=8,
        batch_size=2,
        seed=7,
    )
    dm.prepare_tokenizer()
    return dm, tok


def uninterrupted(cache_dir: str, epoch_batches: int | None, n: int) -> list[torch.Tensor]:
    """The first ``n`` batches of one loader iterated epoch after epoch, no trainer."""
    dm, _ = datamodule(cache_dir, epoch_batches)
    dm.setup("fit")
    loader, out = dm.train_dataloader(), []
    while len(out) < n:
        for batch in loader:
            out.append(batch["tokens"])
            if len(out) == n:
                break
    return out


def fit(
    dm, tok, max_steps: int, ckpt_dir: Path, every: int, ckpt_path: str | None = None
) -> list[torch.Tensor]:
    model = Recorder(tok.vocab_size)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=max_steps,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        callbacks=[
            ModelCheckpoint(
                dirpath=ckpt_dir, every_n_train_steps=every, save_top_k=-1, filename="{step}"
            )
        ],
    )
    trainer.fit(model, datamodule=dm, ckpt_path=ckpt_path)
    return model.seen


@pytest.mark.parametrize(("epoch_batches", "stop"), [(None, 3), (4, 3), (4, 4)])
def test_fit_resume_continues_with_the_uninterrupted_batches(
    tmp_path: Path, cache_dir: str, epoch_batches, stop
) -> None:
    reference = uninterrupted(cache_dir, epoch_batches, 7)
    dm, tok = datamodule(cache_dir, epoch_batches)
    first = fit(dm, tok, stop, tmp_path, every=stop)
    dm2, tok2 = datamodule(cache_dir, epoch_batches)
    rest = fit(
        dm2, tok2, 7, tmp_path / "resumed", every=100, ckpt_path=str(tmp_path / f"step={stop}.ckpt")
    )
    seen = first + rest
    assert len(seen) == 7
    for k, (got, want) in enumerate(zip(seen, reference)):
        assert torch.equal(got, want), f"batch {k} differs after resuming at step {stop}"
