"""Multi30k task 1 (Elliott et al., 2016, W16-3210): English–German image-caption pairs.

Files ``{train,val,test_2016_flickr}.{en,de}.gz`` (29,000 / 1,014 / 1,000 lines, one
sentence per line, line i of ``.en`` translates line i of ``.de``). ``path`` is a folder
holding them; otherwise they are downloaded once into ``<cache_dir>/multi30k``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from src.data.sources import SOURCES
from src.data.sources.base import PairSource, download, file_fingerprint, read_lines
from src.errors import DataError

URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"
SPLIT_FILES = {"train": "train", "val": "val", "test": "test_2016_flickr"}
SHA256 = {
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
}


@SOURCES.register("multi30k")
class Multi30k(PairSource):
    """Pairs ``src_lang -> tgt_lang`` (``en -> de`` by default; swap for ``de -> en``)."""

    def __init__(
        self,
        path: str | None = None,
        src_lang: str = "en",
        tgt_lang: str = "de",
        url: str = URL,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__(cache_dir)
        langs = {"en", "de"}
        for key, lang in (("src_lang", src_lang), ("tgt_lang", tgt_lang)):
            if lang not in langs:
                raise DataError(
                    f"data.{key}={lang!r} is invalid: Multi30k task 1 has 'en' and 'de'"
                )
        if src_lang == tgt_lang:
            raise DataError(
                f"data.tgt_lang={tgt_lang!r} is invalid: choose a target language other than "
                "src_lang"
            )
        self.path, self.src_lang, self.tgt_lang, self.url = path, src_lang, tgt_lang, url

    def file(self, split: str, lang: str) -> Path:
        name = f"{SPLIT_FILES[split]}.{lang}.gz"
        if self.path is not None:
            folder = Path(self.path).expanduser()
            if folder.is_file():
                raise DataError(
                    f"data.path='{folder}' is a file, not a directory; data.path must be a folder "
                    f"with {', '.join(SHA256)}; leave it unset to download them"
                )
            p = folder / name
            if not p.is_file():
                raise DataError(
                    f"data.path='{p}': no such file. data.path must be a folder with "
                    f"{', '.join(SHA256)}; leave it unset to download them"
                )
            return p
        dest = self.cache_dir / "multi30k" / name
        if dest.is_file():
            return dest
        return download(
            f"{self.url}/{name}",
            dest,
            what=f"multi30k {name}",
            key="path",
            sha256=SHA256.get(name) if self.url == URL else None,
        )

    def fingerprint(self) -> dict[str, Any]:
        return {
            "files": [
                file_fingerprint(self.file(s, lang))
                for s in SPLIT_FILES
                for lang in (self.src_lang, self.tgt_lang)
            ],
        }

    def pairs(self) -> dict[str, tuple[list[str], list[str]]]:
        out = {}
        for split in SPLIT_FILES:
            sp, tp = self.file(split, self.src_lang), self.file(split, self.tgt_lang)
            src, tgt = read_lines(sp), read_lines(tp)
            if len(src) != len(tgt):
                raise DataError(
                    f"{sp} has {len(src)} lines but {tp} has {len(tgt)}; translation files must "
                    "align line by line"
                )
            out[split] = (src, tgt)
        return out
