"""LMDataModule: batch shapes, char fitting, caching, determinism, DDP sharding, resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from src.data.datamodule import LMDataModule, build_datamodule
from src.data.tokenizers import build_tokenizer


def make(
    cache_dir: str, tok: str = "char", world_size: int | None = None, rank: int | None = None, **kw
) -> LMDataModule:
    cfg = {"name": "embedded", "cache_dir": cache_dir, **kw.pop("data", {})}
    dm = build_datamodule(
        cfg,
        build_tokenizer({"name": tok}),
        block_size=kw.pop("block_size", 16),
        batch_size=kw.pop("batch_size", 4),
        seed=kw.pop("seed", 0),
        rank=rank,
        world_size=world_size,
        **kw,
    )
    assert isinstance(dm, LMDataModule)
    dm.prepare_tokenizer()
    dm.prepare_data()
    dm.setup("fit")
    return dm


def take(loader, n: int) -> list[torch.Tensor]:
    out = []
    for b in loader:
        out.append(b["tokens"])
        if len(out) == n:
            break
    return out


@pytest.mark.parametrize("tok", ["char", "gpt2"])
def test_batches_follow_the_contract(cache_dir: str, tok: str) -> None:
    dm = make(cache_dir, tok)
    b = next(iter(dm.train_dataloader()))
    assert set(b) == {"tokens"} and b["tokens"].shape == (4, 17) and b["tokens"].dtype == torch.long
    assert int(b["tokens"].max()) < dm.tokenizer.vocab_size
    v = next(iter(dm.val_dataloader()))
    assert v["tokens"].shape == (4, 17)


def test_char_tokenizer_is_fitted_before_the_model_and_cached(cache_dir: str) -> None:
    tok = build_tokenizer({"name": "char"})
    dm = build_datamodule(
        {"name": "embedded", "cache_dir": cache_dir}, tok, block_size=8, batch_size=2, seed=0
    )
    assert not tok.fitted
    assert dm.prepare_tokenizer() is tok and tok.fitted and tok.vocab_size > 50
    # a second process (another rank) finds the cache and the same vocabulary without re-reading the corpus
    tok2 = build_tokenizer({"name": "char"})
    dm2 = build_datamodule(
        {"name": "embedded", "cache_dir": cache_dir}, tok2, block_size=8, batch_size=2, seed=0
    )
    assert dm2.token_dir == dm.token_dir
    dm2.prepare_tokenizer()
    assert tok2.chars == tok.chars


def test_uint16_cache_round_trips(cache_dir: str) -> None:
    from pydoc_data.topics import topics

    dm = make(cache_dir, "gpt2")
    arr = dm.tokens["train"]
    assert isinstance(arr, np.memmap) and arr.dtype == np.uint16
    text = dm.tokenizer.decode(arr[:2000].tolist())
    assert any(text[:200] in t for t in topics.values())


def test_batches_are_deterministic_and_independent_of_workers(cache_dir: str) -> None:
    a = take(make(cache_dir, seed=3).train_dataloader(), 5)
    b = take(make(cache_dir, seed=3, num_workers=2).train_dataloader(), 5)
    c = take(make(cache_dir, seed=4).train_dataloader(), 5)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0])


def test_resume_from_state_dict_gives_the_next_batch(cache_dir: str) -> None:
    ref = take(make(cache_dir).train_dataloader(), 7)
    loader = make(cache_dir).train_dataloader()
    first = take(loader, 3)
    state = loader.state_dict()
    assert state == {"batches_consumed": 3}
    resumed = make(cache_dir).train_dataloader()
    resumed.load_state_dict(state)
    after = take(resumed, 4)
    assert all(torch.equal(x, y) for x, y in zip(first + after, ref))


def test_epochs_have_epoch_batches_and_continue_across_epochs(cache_dir: str) -> None:
    dm = make(cache_dir, data={"epoch_batches": 3})
    loader = dm.train_dataloader()
    assert len(loader) == 3
    e0, e1 = list(loader), list(loader)
    assert len(e0) == len(e1) == 3
    ref = take(make(cache_dir).train_dataloader(), 6)
    assert all(torch.equal(x["tokens"], y) for x, y in zip(e0 + e1, ref))


def test_ddp_ranks_get_distinct_train_batches_and_disjoint_val_windows(cache_dir: str) -> None:
    ranks = [make(cache_dir, world_size=2, rank=r, data={"max_val_windows": 101}) for r in range(2)]
    t0, t1 = (next(iter(dm.train_dataloader()))["tokens"] for dm in ranks)
    assert not torch.equal(t0, t1)
    w = [dm._windows("val") for dm in ranks]
    # 101 windows: the last one is dropped, none duplicated
    assert w[0].per_rank == w[1].per_rank == 50
    assert set(w[0].windows.tolist()).isdisjoint(w[1].windows.tolist())
    # ceil(50 / 4) on every rank
    assert len(ranks[0].val_dataloader()) == len(ranks[1].val_dataloader()) == 13
    single = make(cache_dir, data={"max_val_windows": 101})._windows("val")
    assert sorted(w[0].windows.tolist() + w[1].windows.tolist()) == single.windows[:100].tolist()


def test_val_windows_cover_the_split_without_overlap(cache_dir: str) -> None:
    dm = make(cache_dir, "gpt2")
    rows = torch.cat([b["tokens"] for b in dm.val_dataloader()])
    val = torch.from_numpy(dm.tokens["val"].astype(np.int64))
    n = (len(val) - 1) // 16
    assert rows.shape == (n, 17)
    # consecutive windows share exactly one token
    assert torch.equal(rows[:, :-1].reshape(-1), val[: n * 16])


def test_large_vocabularies_are_stored_as_uint32(tmp_path) -> None:
    from src.data.cache import open_tokens, token_dtype, write_token_dir
    from src.data.tokenizers import Tokenizer

    class Big(Tokenizer):
        name, vocab_size, eos_token_id = "big", 100_000, 99_999

        def encode(self, text: str) -> list[int]:
            return [70_000 + ord(c) for c in text]

    assert (
        token_dtype(50257) == np.uint16
        and token_dtype(65535) == np.uint16
        and token_dtype(65536) == np.uint32
    )
    meta = write_token_dir(
        {"train": ["ab"], "val": ["c"], "test": ["d"]}, Big(), tmp_path, source="t", separate=True
    )
    assert meta["dtype"] == "uint32"
    assert open_tokens(tmp_path, "train", meta).tolist() == [70_097, 70_098, 99_999]


def test_a_reloaded_train_loader_continues_the_stream(cache_dir: str) -> None:
    ref = take(make(cache_dir).train_dataloader(), 5)
    dm = make(cache_dir)
    first = take(dm.train_dataloader(), 2)
    again = take(dm.train_dataloader(), 3)  # as with Trainer(reload_dataloaders_every_n_epochs=1)
    assert all(torch.equal(x, y) for x, y in zip(first + again, ref))
