"""Pre-tokenized ``train.bin`` / ``val.bin`` (nanoGPT's format), read through ``np.memmap``.

``bin`` reads any directory that ``python -m src.prepare`` wrote; ``openwebtext`` is the
same with nanoGPT's recipe as the ``raw`` source to prepare from (the hub's
``openwebtext``, 0.05% held out for val with seed 2357, tokenized with many processes).
The directory holds ``train.bin``, ``val.bin`` (optionally ``test.bin``) of uint16 (uint32
for vocabularies over 65,535) and ``meta.json`` (dtype, token counts, tokenizer state).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from src.data.sources import SOURCES
from src.data.sources.base import Source
from src.errors import DataError

OPENWEBTEXT_RAW = {
    "name": "hf",
    "path": "Skylion007/openwebtext",
    "val_fraction": 0.0005,
    "seed": 2357,
}


@SOURCES.register("bin")
class BinDir(Source):
    """A directory of ``{split}.bin`` token files; ``raw`` is the source ``src.prepare`` fills it
    from."""

    kind = "bin"

    def __init__(
        self,
        dir: str | None = None,
        raw: Mapping[str, Any] | None = None,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__(cache_dir)
        self.dir = Path(dir).expanduser() if dir else self.cache_dir / self.name
        self.raw = dict(raw) if raw is not None else None

    def fingerprint(self) -> dict[str, Any]:
        return {"dir": str(self.dir.resolve())}

    def bin_path(self, split: str, required: bool = True) -> Path | None:
        if self.dir.is_file():
            raise DataError(
                f"data.dir='{self.dir}' is a file, not a directory; point data.dir at the "
                f"directory python -m src.prepare data={self.name} wrote (train.bin, val.bin, "
                "test.bin, meta.json)"
            )
        p = self.dir / f"{split}.bin"
        if not p.is_file():
            if required:
                raise self.not_prepared(p.name)
            return None
        return p

    def not_prepared(self, filename: str) -> DataError:
        """``data.dir`` lacks ``filename``: the one-time ``src.prepare`` step has not run there."""
        return DataError(
            f"data.dir='{self.dir}' has no {filename}; run the one-time step first: python -m "
            f"src.prepare data={self.name} (it tokenizes the corpus into train.bin/val.bin there), "
            "or point data.dir at a prepared directory"
        )


@SOURCES.register("openwebtext")
class OpenWebText(BinDir):
    """OpenWebText (~9 B GPT-2 tokens; ~54 GB download for ``src.prepare``)."""

    def __init__(
        self,
        dir: str | None = None,
        raw: Mapping[str, Any] | None = None,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__(dir, raw if raw is not None else OPENWEBTEXT_RAW, cache_dir)
