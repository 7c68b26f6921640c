"""Data sources, registered by name (``data=<name>`` picks ``conf/data/<name>.yaml``).

Importing this package registers every source; ``build_source(cfg)`` builds one from a
config node and fails loudly on unknown names or keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from src.data.sources.base import LMSource, PairSource, Source
from src.errors import DataError, check_keys
from src.registry import Registry

#: files and corpora live in this package; the synthetic tasks beside their base class
SOURCES: Registry[Source] = Registry("source", package=("src.data.sources", "src.data.synthetic"))


#: keys of a data config node that configure batching (the datamodule), by source kind; the rest
#: build the source
DATAMODULE_KEYS: dict[str, tuple[str, ...]] = {
    "lm": ("epoch_batches", "val_batch_size", "max_val_windows", "num_proc", "document_mask"),
    "pairs": (
        "epoch_batches",
        "val_batch_size",
        "max_src_len",
        "max_tgt_len",
        "bucket_batches",
        "document_mask",
    ),
}
DATAMODULE_KEYS["bin"] = DATAMODULE_KEYS["lm"]
DATAMODULE_KEYS["synthetic"] = (
    "epoch_batches",
    "val_batch_size",
    "train_min_length",
    "document_mask",
)  # generated tasks (src/data/synthetic)
#: the batches each source kind yields: text windows {"tokens"} or pairs {"src_ids", "src_mask",
#: "tgt_ids", "tgt_mask"}
BATCH_FORMATS: dict[str, str] = {
    "lm": "text",
    "bin": "text",
    "pairs": "pairs",
    "synthetic": "pairs",
}


def split_config(cfg: Mapping[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(kind, source node, datamodule kwargs)`` from a plain data config node."""
    node = dict(cfg)
    name = node.get("name")
    if name not in SOURCES:
        raise _unknown_source(name)
    kind = SOURCES.get(name).kind
    dm_kwargs = {k: node.pop(k) for k in DATAMODULE_KEYS[kind] if k in node}
    dm_kwargs.pop("document_mask", None)  # read by the objective (src/config/document_mask.py)
    return kind, node, dm_kwargs


def check_source(cfg: Mapping[str, Any]) -> tuple[type[Source], dict[str, Any]]:
    """(class, constructor keys) of ``{name: <source>, <its keys>...}`` (datamodule keys already
    removed); unknown names and keys fail with the accepted ones listed. Builds nothing."""
    node = dict(cfg)
    name = node.pop("name", None)
    if name not in SOURCES:
        raise _unknown_source(name)
    cls = SOURCES.get(name)
    accepted = SOURCES.accepted_keys(name)
    check_keys(node, accepted, where=f"data={name}", prefix="data.", error=DataError)
    return cls, node


def _unknown_source(name: Any) -> DataError:
    return DataError(
        f"unknown data source '{name}'; registered sources: {', '.join(SOURCES.names())} "
        "(data=<name> picks conf/data/<name>.yaml)"
    )


def build_source(cfg: Mapping[str, Any]) -> Source:
    """From ``{name: <source>, <its keys>...}`` (datamodule keys already removed)."""
    cls, node = check_source(cfg)
    return cls(**node)


__all__ = [
    "SOURCES",
    "DATAMODULE_KEYS",
    "BATCH_FORMATS",
    "Source",
    "LMSource",
    "PairSource",
    "build_source",
    "check_source",
    "split_config",
]
