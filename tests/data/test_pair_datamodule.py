"""PairDataModule (translation): batch contract, padding, determinism, DDP shards, resume."""

from __future__ import annotations

from pathlib import Path

import torch

from src.data.datamodule import PairDataModule, build_datamodule
from src.data.tokenizers import build_tokenizer
from tests.data.conftest import shared


def make(folder: Path, cache_dir: str, **kw) -> PairDataModule:
    cfg = {"name": "multi30k", "path": str(folder), "cache_dir": cache_dir, **kw.pop("data", {})}
    dm = build_datamodule(
        cfg,
        build_tokenizer({"name": "gpt2"}),
        block_size=kw.pop("block_size", 32),
        batch_size=kw.pop("batch_size", 4),
        seed=kw.pop("seed", 0),
        **kw,
    )
    assert isinstance(dm, PairDataModule)
    dm.prepare_data()
    dm.setup("fit")
    return dm


def test_batch_contract_padding_and_eos(tiny_multi30k: Path, cache_dir: str) -> None:
    dm = make(tiny_multi30k, cache_dir)
    tok = dm.tokenizer
    b = next(iter(dm.val_dataloader()))
    assert set(b) == {"src_ids", "src_mask", "tgt_ids", "tgt_mask"}
    assert all(v.dtype == torch.long for v in b.values()) and b["src_ids"].shape[0] == 4
    for row in range(4):
        n = int(b["tgt_mask"][row].sum())
        assert b["tgt_mask"][row, :n].all() and not b["tgt_mask"][row, n:].any()  # right padding
        assert int(b["tgt_ids"][row, n - 1]) == tok.eos_token_id
        assert (b["tgt_ids"][row, n:] == tok.pad_token_id).all()
    # val keeps file order; the source side is English by default
    assert (
        tok.decode(b["src_ids"][1, : int(b["src_mask"][1].sum()) - 1].tolist())
        == "a man rides a red val 1."
    )
    assert tok.decode(b["tgt_ids"][1, : int(b["tgt_mask"][1].sum()) - 1].tolist()).endswith(
        "val 1."
    )


def test_direction_and_truncation(tiny_multi30k: Path, cache_dir: str) -> None:
    dm = make(tiny_multi30k, cache_dir, data={"src_lang": "de", "tgt_lang": "en", "max_src_len": 5})
    b = next(iter(dm.test_dataloader()))
    assert b["src_ids"].shape[1] <= 5
    assert (
        dm.tokenizer.decode(b["tgt_ids"][0, : int(b["tgt_mask"][0].sum()) - 1].tolist())
        == "a man test_2016_flickr 0."
    )


def test_train_epochs_are_permutations_and_deterministic(
    tiny_multi30k: Path, cache_dir: str
) -> None:
    dm = make(tiny_multi30k, cache_dir, batch_size=8, data={"bucket_batches": 2})
    loader = dm.train_dataloader()
    assert len(loader) == 5  # 40 pairs / 8
    epoch = [b for b in loader]
    again = [
        b
        for b in make(
            tiny_multi30k, cache_dir, batch_size=8, data={"bucket_batches": 2}
        ).train_dataloader()
    ]
    assert all(torch.equal(a["src_ids"], b["src_ids"]) for a, b in zip(epoch, again))
    plan = dm.train_dataloader().dataset.make_batch.plan(0)
    assert sorted(plan.reshape(-1).tolist()) == list(range(40))
    lengths = dm.pairs["train"][0].lengths[plan.reshape(5, 8)]
    assert all((row[:-1] <= row[1:]).all() for row in lengths)  # bucketed: sorted within a batch


def test_ddp_shards_are_disjoint(tiny_multi30k: Path, cache_dir: str) -> None:
    ranks = [make(tiny_multi30k, cache_dir, batch_size=4, rank=r, world_size=2) for r in range(2)]
    plans = [dm.train_dataloader().dataset.make_batch.plan(0) for dm in ranks]
    assert (
        plans[0] == plans[1]
    ).all()  # one global plan; rank r takes slice r of each global batch
    train = [set(p[:, r].reshape(-1).tolist()) for r, p in enumerate(plans)]
    assert train[0].isdisjoint(train[1]) and len(train[0] | train[1]) == 40
    val = [dm.val_dataloader().dataset.make_batch.indices.tolist() for dm in ranks]
    assert val == [
        [0, 2, 4, 6],
        [1, 3, 5, 7],
    ]  # 9 val pairs: the 9th is dropped so both ranks run 1 batch


def test_resume_continues_the_stream(tiny_multi30k: Path, cache_dir: str) -> None:
    ref_loader = make(tiny_multi30k, cache_dir, data={"epoch_batches": 3}).train_dataloader()
    ref = [b["src_ids"] for b in ref_loader] + [b["src_ids"] for b in ref_loader]
    loader = make(tiny_multi30k, cache_dir, data={"epoch_batches": 3}).train_dataloader()
    it = iter(loader)
    first = [next(it)["src_ids"] for _ in range(2)]
    resumed = make(tiny_multi30k, cache_dir, data={"epoch_batches": 3}).train_dataloader()
    resumed.load_state_dict(loader.state_dict())
    rest = [b["src_ids"] for b in resumed] + [b["src_ids"] for b in resumed]
    assert len(rest) == 4 and all(torch.equal(a, b) for a, b in zip(first + rest, ref))


def test_real_multi30k_when_present(cache_dir: str) -> None:
    from src.data.sources import build_source

    pairs = build_source(
        {"name": "multi30k", "path": str(shared("multi30k_en_de")), "cache_dir": cache_dir}
    ).pairs()
    assert {k: len(v[0]) for k, v in pairs.items()} == {"train": 29000, "val": 1014, "test": 1000}
    assert pairs["train"][0][0] == "Two young, White males are outside near many bushes."
    assert (
        pairs["train"][1][0] == "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche."
    )
