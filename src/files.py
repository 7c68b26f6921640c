"""The one way this project writes a file: atomically, into the file's own directory.

Every writer (run JSON files, checkpoints, the token cache and its ``meta.json``, downloads, the
report's files) goes through ``atomic_path``: the content is written to a temporary name in the
destination's directory, flushed to disk, and renamed over the destination. A reader (or a
process killed half-way) sees the old file or the new one, never a fragment; on any error the
temporary file is removed and the destination is untouched. The rename replaces a symlink at the
destination with the new file: nothing is written through a link to a file elsewhere.

    with atomic_path(dest) as tmp:        # tmp: .<name>.<pid>.tmp beside dest
        np.save(tmp, array)               # any writer that takes a path
    atomic_write(dest, "text\\n")          # str or bytes
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

PathLike = str | os.PathLike[str]


def temp_name(dest: Path, suffix: str = "") -> Path:
    """``.<name>.<pid>.tmp<suffix>`` beside ``dest`` (hidden, per process, so two writers never share it)."""
    return dest.with_name(f".{dest.name}.{os.getpid()}.tmp{suffix}")


def fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    with contextlib.suppress(OSError), open(path, "rb") as f:
        os.fsync(f.fileno())


def _writer_alive(tmp: Path, dest: Path) -> bool:
    """Whether the process named in ``tmp`` (``.<name>.<pid>.tmp…``) still runs (its write may be under way)."""
    pid = tmp.name[len(dest.name) + 2:].split(".", 1)[0]
    if not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _replace(tmp: Path, dest: Path) -> None:
    os.replace(tmp, dest)


@contextlib.contextmanager
def atomic_path(dest: PathLike, *, suffix: str = "", durable: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside ``dest``; when the block ends without an error, the file
    written there replaces ``dest`` atomically (after an fsync of the file and, for ``durable``,
    of the directory). On an error the temporary file is removed and ``dest`` is left as it was.

    suffix: appended to the temporary name, for writers that add or require an extension
    (``np.savez`` wants ``.npz``). A leftover temporary of ``dest`` from a process killed
    mid-write is removed after the next successful write.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(dest, suffix)
    try:
        yield tmp
        if durable:
            _fsync_file(tmp)
        _replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(dest.parent)
    for stale in dest.parent.glob(f".{dest.name}.*.tmp*"):  # left by a process killed mid-write
        if not _writer_alive(stale, dest):
            with contextlib.suppress(OSError):
                stale.unlink()


def atomic_write(dest: PathLike, data: str | bytes, *, durable: bool = False) -> Path:
    """Write ``data`` (text as UTF-8, or bytes) to ``dest`` atomically; returns ``dest`` as a Path."""
    with atomic_path(dest, durable=durable) as tmp:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
    return Path(dest)
