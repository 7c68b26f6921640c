"""The public files the docs and studies read from ``../shared`` (``data/`` and
``anchors/nanogpt/``), fetched from their own repositories at pinned commits and checked by
sha256: ``python -m src.prepare shared-data --out ../shared``.

Nothing in the product needs them; the studies (``paths.data_dir``), the evaluation recipes and the
peer benchmarks (perf/) do. Each file's origin, commit and licence is in the folder's SOURCE.txt
in the layout the project was measured with; here each file is a URL and its checksum. A file
already present with the right checksum is kept; a download goes to a temporary name beside its
destination and is renamed into place only after its checksum matches (``src.files.atomic_path``),
so an interrupted fetch leaves no partial file and a re-run resumes.
"""

from __future__ import annotations

import argparse
import hashlib
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from src.errors import DataError
from src.files import atomic_path

RAW = "https://raw.githubusercontent.com"


@dataclass(frozen=True)
class Remote:
    """One file: where it goes under the output folder, where it comes from, its sha256."""

    path: str  # relative to the output folder: data/<set>/<file> or anchors/nanogpt/<file>
    url: str
    sha256: str


def _github(repo: str, commit: str, files: Iterable[tuple[str, str, str]]) -> list[Remote]:
    """``(path in the repository, destination, sha256)`` at ``repo``'s ``commit``."""
    return [Remote(dest, f"{RAW}/{repo}/{commit}/{src}", sha) for src, dest, sha in files]


MULTI30K = "data/multi30k_en_de"
NANOGPT = "anchors/nanogpt"
#: the sets by name (``--only``), each the files of one folder (see its SOURCE.txt)
SETS: dict[str, list[Remote]] = {
    "tinyshakespeare": _github(
        "karpathy/char-rnn",
        "6f9487a6fe5b420b7ca9afb0d7c078e37c1d1b4e",
        [
            (
                "data/tinyshakespeare/input.txt",
                "data/tinyshakespeare/input.txt",
                "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
            )
        ],
    ),
    "multi30k_en_de": _github(
        "multi30k/dataset",
        "a3d2e0d26b56f3846f66a952536ffed4e401d05a",
        [
            (f"data/task1/raw/{name}", f"{MULTI30K}/{name}", sha)
            for name, sha in (
                ("train.en.gz", "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f"),
                ("train.de.gz", "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6"),
                ("val.en.gz", "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28"),
                ("val.de.gz", "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a"),
                (
                    "test_2016_flickr.en.gz",
                    "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
                ),
                (
                    "test_2016_flickr.de.gz",
                    "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
                ),
            )
        ],
    ),
    "wikitext2": _github(
        "pytorch/examples",
        "77f55b912142e11fcfdf5b530231fb9c52f181e8",
        [
            (f"word_language_model/data/wikitext-2/{name}", f"data/wikitext2/{name}", sha)
            for name, sha in (
                ("valid.txt", "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8"),
                ("test.txt", "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0"),
                ("README", "ed96062abea03d4f4e8ca80f0caad8b07ec59687b8064319c7ee6f6d900b6286"),
            )
        ],
    ),
    "lambada": _github(
        "cybertronai/bflm",
        "620fff70127e0a7c741ee229ed2e33e25dd5185a",
        [
            (
                "lambada_test.jsonl",
                "data/lambada/lambada_test.jsonl",
                "4aa8d02cd17c719165fc8a7887fddd641f43fcafa4b1c806ca8abc31fabdb226",
            )
        ],
    ),
    "hellaswag_val": _github(
        "klosax/hellaswag_text_data",
        "1105d370f8340eac3c63a91fd1fa58e8999f9505",
        [
            (
                "hellaswag_val_full.txt.bz2",
                "data/hellaswag_val/hellaswag_val_full.txt.bz2",
                "50b637899e4263c2bc456c2dc726c95d2c8cd8e2a552ea5bd7719ce3cb03fe5b",
            )
        ],
    ),
    # nanoGPT's shakespeare_char recipe: the peer perf/nanogpt_side_by_side.py measures against
    "nanogpt": _github(
        "karpathy/nanoGPT",
        "3adf61e154c3fe3fca428ad6bc3818b27a3b8291",
        [
            (name, f"{NANOGPT}/{name}", sha)
            for name, sha in (
                ("model.py", "7c01703240dbec5d554527dc666e35b3df8391d0b117fddc07afcf325a21d11c"),
                ("train.py", "413bd97b40bb400a2a0d01230e2946f056c263ebac1b7281c2367d964a123085"),
                (
                    "configurator.py",
                    "5cc23aca26b4ab3c0d9e5f82740f4781f9444f42718c15abcee70d93c5aabe8f",
                ),
                (
                    "config/train_shakespeare_char.py",
                    "9b41cdfb2c917259d796a8184d835221a349c23cd18a0a63b46da431d95d9c05",
                ),
                (
                    "data/shakespeare_char/prepare.py",
                    "d5fbea0686d146748cf36017d6c34136a2fe9c41f065f1429529ad55a992c692",
                ),
                ("LICENSE", "a59ec5cdb1c1e447e5266a014b3e7ded511f8d6e5a08931e931c87490ff821fe"),
            )
        ],
    ),
}


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_one(remote: Remote, out: Path, url: str | None = None, timeout: float = 60.0) -> str:
    """Download ``remote`` into ``out`` unless it is there with its checksum: "kept" | "fetched".
    ``url``: another address of the same file (a mirror; the tests' file:// copies)."""
    dest = out / remote.path
    if dest.is_file() and sha256_of(dest) == remote.sha256:
        return "kept"
    source = url or remote.url
    with atomic_path(dest, root=out) as tmp, tmp.open("wb") as f:
        try:
            response = urllib.request.urlopen(source, timeout=timeout)
        except (OSError, ValueError) as e:  # URLError is an OSError
            raise _unreachable(source, e, dest, remote) from None
        with response:
            while True:
                try:
                    block = response.read(1 << 20)
                except OSError as e:  # the connection, not the disk
                    raise _unreachable(source, e, dest, remote) from None
                if not block:
                    break
                f.write(block)  # a full disk: atomic_path's WriteError, naming the file
        f.flush()
        got = sha256_of(tmp)
        if got != remote.sha256:
            raise DataError(
                f"{source} has sha256 {got}, not the pinned {remote.sha256}; the file changed "
                f"upstream or the download was altered: {dest} was not written"
            )
    return "fetched"


def _unreachable(source: str, e: Exception, dest: Path, remote: Remote) -> DataError:
    return DataError(
        f"could not download {source} ({getattr(e, 'reason', e)}); with no network, copy the "
        f"file by hand to {dest} (sha256 {remote.sha256})"
    )


def fetch(out: Path, names: Sequence[str] | None = None, mirror: str | None = None) -> list[str]:
    """Every file of the sets ``names`` (default all) under ``out``; one line per file.
    ``mirror``: a base URL that replaces ``RAW/<repo>/<commit>`` by the file's own path."""
    unknown = sorted(set(names or ()) - set(SETS))
    if unknown:
        raise DataError(f"--only {' '.join(unknown)}: no such set; the sets are {', '.join(SETS)}")
    lines = []
    for name in names or list(SETS):
        for remote in SETS[name]:
            url = f"{mirror.rstrip('/')}/{remote.path}" if mirror else None
            lines.append(f"{fetch_one(remote, out, url):8} {out / remote.path}")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m src.prepare shared-data",
        description="Fetch the public data sets and the nanoGPT peer the docs and studies use "
        "(../shared in the docs) from their repositories at pinned commits, checked by sha256.",
    )
    ap.add_argument("--out", required=True, help="the folder that becomes ../shared")
    ap.add_argument("--only", nargs="+", metavar="SET", help=f"some of: {', '.join(SETS)}")
    ap.add_argument("--mirror", default=None, help="a base URL holding the same layout")
    args = ap.parse_args(argv)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for line in fetch(out, args.only, args.mirror):
            print(line, flush=True)
    except (DataError, OSError) as e:
        ap.exit(1, f"python -m src.prepare shared-data: {e}\n")
    print(f"shared data in {out}: pass paths.data_dir={out / 'data'} to the studies")
