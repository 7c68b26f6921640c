"""Every source loads: the public files when present (else skipped), local and built-in ones always."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from src.data.datamodule import build_datamodule
from src.data.sources import SOURCES, build_source
from src.data.tokenizers import build_tokenizer
from tests.data.conftest import shared


def test_registered_sources_have_configs(conf_dir: Path) -> None:
    from omegaconf import OmegaConf

    configs = {p.stem: OmegaConf.load(p) for p in (conf_dir / "data").glob("*.yaml")}
    assert set(SOURCES.names()) <= set(configs)  # every source has its own config ...
    for stem, node in configs.items():  # ... and every config (a source's own, or a preset such as
        assert "cache_dir" in node  # fineweb_edu = a bin source with its raw node) names a source
        assert (
            node["name"] == stem if stem in SOURCES.names() else node["name"] in SOURCES.names()
        ), stem


def test_embedded_is_deterministic_and_offline(cache_dir: str) -> None:
    a = build_source({"name": "embedded", "cache_dir": cache_dir}).splits()
    b = build_source({"name": "embedded", "cache_dir": cache_dir}).splits()
    assert a == b and set(a) == {"train", "val", "test"}
    sizes = {k: sum(map(len, v)) for k, v in a.items()}
    total = sum(sizes.values())
    assert (
        total > 300_000 and 0.04 < sizes["val"] / total < 0.2 and 0.04 < sizes["test"] / total < 0.2
    )


def test_tinyshakespeare_from_a_local_copy(cache_dir: str) -> None:
    path = shared("tinyshakespeare", "input.txt")
    src = build_source({"name": "tinyshakespeare", "path": str(path), "cache_dir": cache_dir})
    s = src.splits()
    sizes = {k: len(v[0]) for k, v in s.items()}
    assert sizes == {
        "train": 1003854,
        "val": 55770,
        "test": 55770,
    }  # nanoGPT's 90% trains; its last 10% = val + test
    assert s["train"][0] + s["val"][0] + s["test"][0] == path.read_text()
    dm = build_datamodule(
        {"name": "tinyshakespeare", "path": str(path), "cache_dir": cache_dir},
        build_tokenizer({"name": "char"}),
        block_size=32,
        batch_size=2,
        seed=0,
    )
    assert dm.prepare_tokenizer().vocab_size == 65
    dm.setup("fit")
    assert (len(dm.tokens["val"]), len(dm.tokens["test"])) == (
        55770,
        55770,
    )  # test distinct from val


def test_tinyshakespeare_gpt2_token_counts_match_nanogpt(cache_dir: str) -> None:
    path = shared("tinyshakespeare", "input.txt")
    dm = build_datamodule(
        {"name": "tinyshakespeare", "path": str(path), "cache_dir": cache_dir},
        build_tokenizer({"name": "gpt2"}),
        block_size=32,
        batch_size=2,
        seed=0,
    )
    dm.setup("fit")
    train, val, test = (len(dm.tokens[s]) for s in ("train", "val", "test"))
    # nanoGPT data/shakespeare/prepare.py: 301,966 / 36,059; its val cut in two is re-tokenized at the cut
    assert train == 301966 and abs(val + test - 36059) <= 2 and min(val, test) > 17_000


def test_tinyshakespeare_uses_the_cached_download(tmp_path: Path) -> None:
    """With no path, <cache_dir>/tinyshakespeare/input.txt is used (downloaded there once when online)."""
    dest = tmp_path / "tinyshakespeare" / "input.txt"
    dest.parent.mkdir()
    dest.write_text("First Citizen:\nBefore we proceed any further, hear me speak.\n")
    src = build_source(
        {"name": "tinyshakespeare", "cache_dir": str(tmp_path), "url": "http://127.0.0.1:9/never"}
    )
    assert src.file() == dest


def test_text_files_globs_and_val_paths(tmp_path: Path, small_text: Path, cache_dir: str) -> None:
    (tmp_path / "a").mkdir()
    for i in range(3):
        (tmp_path / "a" / f"{i}.txt").write_text(f"document {i}\n" * 50)
    src = build_source(
        {
            "name": "text",
            "paths": [str(tmp_path / "a" / "*.txt")],
            "val_paths": [str(small_text)],
            "cache_dir": cache_dir,
        }
    )
    s = src.splits()
    whole = "".join(f"document {i}\n" * 50 for i in range(3))  # 1,650 characters
    assert (
        s["val"] == [small_text.read_text()] and "".join(s["train"]) + "".join(s["test"]) == whole
    )
    assert len("".join(s["test"])) == 165  # no test_paths: the last 10% of the training text tests
    # fraction split: [train 80% | val 10% | test 10%] of the characters, a document cut where a split starts
    s = build_source(
        {"name": "text", "paths": [str(tmp_path / "a" / "*.txt")], "cache_dir": cache_dir}
    ).splits()
    assert "".join(s["train"]) + "".join(s["val"]) + "".join(s["test"]) == whole
    assert (len("".join(s["val"])), len("".join(s["test"]))) == (165, 165) and len(s["val"]) == 1
    s = build_source(
        {
            "name": "text",
            "paths": [str(tmp_path / "a" / "*.txt")],
            "val_paths": [str(small_text)],
            "test_paths": [str(small_text)],
            "cache_dir": cache_dir,
        }
    ).splits()
    # both held-out splits from files: train keeps all
    assert s["train"] == [f"document {i}\n" * 50 for i in range(3)]


def test_cache_key_follows_content(tmp_path: Path, cache_dir: str) -> None:
    f = tmp_path / "c.txt"
    f.write_text("abcdefgh" * 100)
    cfg = {"name": "text", "paths": [str(f)], "cache_dir": cache_dir}
    d1 = build_datamodule(
        cfg, build_tokenizer({"name": "char"}), block_size=4, batch_size=1, seed=0
    ).token_dir
    f.write_text("abcdefgi" * 100)
    d2 = build_datamodule(
        cfg, build_tokenizer({"name": "char"}), block_size=4, batch_size=1, seed=0
    ).token_dir
    d3 = build_datamodule(
        cfg, build_tokenizer({"name": "gpt2"}), block_size=4, batch_size=1, seed=0
    ).token_dir
    assert len({d1, d2, d3}) == 3


def test_hf_source_on_a_local_json_file(tmp_path: Path, cache_dir: str) -> None:
    rows = [{"body": f"record number {i} says hello", "id": i} for i in range(60)]
    f = tmp_path / "rows.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows))
    cfg = {
        "name": "hf",
        "path": "json",
        "data_files": {"train": [str(f)]},
        "text_column": "body",
        "val_fraction": 0.1,
        "test_fraction": 0.1,
        "seed": 1,
        "cache_dir": cache_dir,
    }
    src = build_source(cfg)
    s = src.splits()
    assert (s["train"].num_rows, s["val"].num_rows, s["test"].num_rows) == (
        48,
        6,
        6,
    )  # val of 60, then test of 54
    assert s["train"].column_names == ["text"]
    texts = [set(s[k]["text"]) for k in ("train", "val", "test")]
    # three disjoint splits
    assert not (texts[0] & texts[1] or texts[0] & texts[2] or texts[1] & texts[2])
    tok = build_tokenizer({"name": "gpt2"})
    dm = build_datamodule(cfg, tok, block_size=8, batch_size=2, seed=0)
    dm.setup("fit")
    val = np.asarray(dm.tokens["val"])
    assert (val == tok.eos_token_id).sum() == 6  # one eos after every document
    assert next(iter(dm.train_dataloader()))["tokens"].shape == (2, 9)


def test_hf_streaming_reads_the_stream_once(
    tmp_path: Path, small_text: Path, cache_dir: str
) -> None:
    cfg = {
        "name": "hf",
        "path": "text",
        "data_files": {"train": [str(small_text)]},
        "streaming": True,
        "streaming_val_documents": 40,
        "streaming_test_documents": 20,
        "max_documents": 200,
        "cache_dir": cache_dir,
    }
    tok = build_tokenizer({"name": "gpt2"})
    dm = build_datamodule(cfg, tok, block_size=8, batch_size=2, seed=0)
    dm.setup("fit")
    lines = small_text.read_text().splitlines()
    n = [len(tok.encode(line)) + 1 for line in lines]  # + eos per document (line)
    assert dm.meta["tokens"]["val"] == sum(n[:40])  # the first 40 documents validate
    assert dm.meta["tokens"]["test"] == sum(n[40:60])  # the next 20 test
    assert dm.meta["tokens"]["train"] == sum(n[60:260])  # then at most 200 train documents


def test_multi30k_line_files_when_present(cache_dir: str) -> None:
    src = build_source(
        {
            "name": "multi30k",
            "path": str(shared("multi30k_en_de")),
            "src_lang": "de",
            "tgt_lang": "en",
            "cache_dir": cache_dir,
        }
    )
    de, en = src.pairs()["test"]
    assert len(de) == len(en) == 1000 and en[0].startswith("A man in an orange hat")


@pytest.mark.parametrize("name", ["openwebtext", "bin"])
def test_bin_sources_default_to_the_cache(name: str, cache_dir: str) -> None:
    src = build_source(
        {
            "name": name,
            "cache_dir": cache_dir,
            **({"dir": None} if name == "openwebtext" else {"dir": "/x"}),
        }
    )
    assert src.kind == "bin"


def test_your_own_text_as_a_file_a_directory_or_json_lines_trains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """data=text with data.path=<file>, a directory of .txt files, or a .jsonl file (one document per line)
    trains under fast_dev_run; the jsonl documents are read from text_field."""
    import json

    from src.data.sources import build_source
    from tests.training.conftest import TINY, train_in_process

    monkeypatch.setenv("TRANSFORMER_LAB_CACHE", str(tmp_path / "cache"))
    text = "To be, or not to be, that is the question. " * 40
    (tmp_path / "one.txt").write_text(text)
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(3):
        (folder / f"{i}.txt").write_text(text)
    (folder / "skip.md").write_text("not read")
    (tmp_path / "docs.jsonl").write_text(
        "\n".join(json.dumps({"id": i, "body": text}) for i in range(4)) + "\n"
    )
    # the .txt files, in name order
    assert len(build_source({"name": "text", "path": str(folder)}).files) == 3
    docs = build_source(
        {"name": "text", "path": str(tmp_path / "docs.jsonl"), "text_field": "body"}
    )._read([tmp_path / "docs.jsonl"])
    assert docs == [text] * 4
    base = [o for o in TINY if not o.startswith("data=")]
    for i, data in enumerate(
        [
            f"data.path={tmp_path / 'one.txt'}",
            f"data.path={folder}",
            f"data.path={tmp_path / 'docs.jsonl'}",
        ]
    ):
        extra = ["data.text_field=body"] if data.endswith(".jsonl") else []
        train_in_process(
            [*base, "data=text", data, *extra, "trainer.fast_dev_run=true"], tmp_path / f"run{i}"
        )
        assert (
            json.loads((tmp_path / f"run{i}" / "metrics.json").read_text())["status"] == "completed"
        )
