"""The token-id check of prepared data (``src.data.token_check``) on a large ``.bin``, against a
plain chunked read of the same file.

Every ``LMDataModule.setup`` reads a ``.bin`` / token cache once to check that no id reaches the
vocabulary. Measured on a file of ``--gib`` GiB of uint16 GPT-2 ids (written once into
``--dir``), twice each: from the page cache (warm) and with the file's pages dropped first
(``posix_fadvise(DONTNEED)``: cold, read from the disk). The peer is reading the file in 64 MiB
``readinto`` chunks, the least any check of every byte costs.

    python perf/token_check.py            # 1 GiB (~30 s, 1 GiB of disk in /tmp)
    python perf/token_check.py --quick    # 16 MiB smoke run
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from perf.common import base_parser, interleaved, machine_header, median, setup, spread, table

TARGET = 1.0  # the check over a plain read of the file (<= 1: no slower than reading it)


def parse_args(argv: list[str] | None = None):
    p = base_parser(__doc__.split("\n")[0])
    p.add_argument("--gib", type=float, default=1.0, help="file size in GiB")
    p.add_argument(
        "--dir", default=tempfile.gettempdir(), help="where the test file is written (and kept)"
    )
    args = p.parse_args(argv)
    if args.quick:
        args.gib = 1 / 64
    args.repeats = args.repeats or (2 if args.quick else 3)
    return args


def make_file(path: Path, n_tokens: int, seed: int) -> None:
    """``n_tokens`` random uint16 ids below 50,257, written in 64 Mi-token blocks (skipped if present)."""
    if path.is_file() and path.stat().st_size == 2 * n_tokens:
        return
    rng = np.random.default_rng(seed)
    mm = np.memmap(path, dtype=np.uint16, mode="w+", shape=(n_tokens,))
    for start in range(0, n_tokens, 1 << 26):
        mm[start : start + (1 << 26)] = rng.integers(
            0, 50257, size=min(1 << 26, n_tokens - start), dtype=np.uint16
        )
    mm.flush()
    del mm


def drop_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    setup(args)
    from src.data import token_check

    n_tokens = int(args.gib * (1 << 30)) // 2
    path = Path(args.dir) / f"tlab-token-check-{n_tokens}.bin"
    make_file(path, n_tokens, args.seed)

    def read() -> None:
        buf = bytearray(1 << 26)
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass

    def check() -> None:
        token_check._file_max.cache_clear()  # measure the scan, not the per-process memo
        token_check.check_token_ids(
            np.memmap(path, dtype=np.uint16, mode="r"), 50257, where=path, bound="GPT-2"
        )

    warm = interleaved({"check": check, "read": read}, repeats=args.repeats)
    cold: dict[str, list[float]] = {"check": [], "read": []}
    for _ in range(args.repeats):
        for name, fn in (("check", check), ("read", read)):
            drop_cache(path)
            cold[name] += interleaved({name: fn}, repeats=1, warmup=0)[name]
    gib = n_tokens * 2 / (1 << 30)
    rows = [
        [f"{name} ({state})", median(t[name]), gib / median(t[name]), spread(t[name])]
        for state, t in (("warm", warm), ("cold", cold))
        for name in ("check", "read")
    ]
    ratio = median(cold["check"]) / median(cold["read"])
    print(
        machine_header(
            "token-id check of a prepared .bin", {"file": f"{gib:.3g} GiB of uint16 ids ({path})"}
        )
    )
    print()
    print(table(["subject", "seconds", "GiB/s", "spread"], rows))
    print()
    print(
        f"check/read (cold): {ratio:.2f}× (target ≤ {TARGET:g}×: {'met' if ratio <= TARGET else 'MISSED'})"
    )
    return {"ratio": ratio, "check_s": median(cold["check"]), "warm_check_s": median(warm["check"])}


if __name__ == "__main__":
    main()
