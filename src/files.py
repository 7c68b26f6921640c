"""The one way this project writes a file: atomically, confined, into the file's own directory.

Every writer (run JSON files, checkpoints, the token cache and its ``meta.json``, downloads, the
report's files) goes through ``atomic_path``: the content is written to a temporary name in the
destination's directory, flushed to disk, and renamed over the destination. A reader (or a
process killed half-way) sees the old file or the new one, never a fragment; on any error the
temporary file is removed and the destination is untouched.

Confinement: nothing is written through a symlink to a place elsewhere.

* the destination: the rename replaces a symlink there with the new file (the link's target is
  never opened);
* the temporary file: it is created fresh (``O_CREAT | O_EXCL | O_NOFOLLOW``; a link planted
  under its name is removed, not followed) before the writer opens it;
* the directories: with ``root`` (the output directory: the report's ``--out``, a run
  directory, a token directory), the destination's directory must resolve inside ``root``;
  a symlinked sub-directory pointing out of it is refused with a ``WriteError`` before anything
  is created or written.

A write the OS refuses (a full disk, a quota, a read-only place) is a ``WriteError`` naming the
file, the reason and the free space, and the previous file stays whole.

    with atomic_path(dest, root=out) as tmp:  # tmp: .<name>.<pid>.tmp beside dest
        np.save(tmp, array)                   # any writer that takes a path
    atomic_write(dest, "text\\n", root=out)   # str or bytes
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from src.errors import WriteError

PathLike = str | os.PathLike[str]
#: errnos of a write the OS refused: no space, quota, file too large, read-only, I/O error, no
#: permission
REFUSED = {
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EFBIG,
    errno.EROFS,
    errno.EIO,
    errno.EACCES,
    errno.EPERM,
}


def temp_name(dest: Path, suffix: str = "") -> Path:
    """``.<name>.<pid>.tmp<suffix>`` beside ``dest`` (hidden, per process, so two writers never
    share it)."""
    return dest.with_name(f".{dest.name}.{os.getpid()}.tmp{suffix}")


def fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (POSIX); a no-op where directories cannot be
    opened."""
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
    """Whether the process named in ``tmp`` (``.<name>.<pid>.tmp…``) still runs (its write may be
    under way)."""
    pid = tmp.name[len(dest.name) + 2 :].split(".", 1)[0]
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


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def confine(dest: PathLike, root: PathLike) -> Path:
    """``dest`` if its directory, symlinks resolved, lies inside ``root`` (also resolved); else a
    ``WriteError`` naming the link that leads out. Checks the deepest existing directory, so
    nothing is created outside ``root`` either."""
    dest, top = Path(os.path.abspath(dest)), Path(os.path.realpath(root))
    lexical_root = Path(os.path.abspath(root))
    if not _inside(Path(os.path.normpath(dest)), lexical_root) and not _inside(
        Path(os.path.normpath(dest)), top
    ):
        raise WriteError(
            f"refusing to write {dest}: it is not inside the output directory {lexical_root}"
        )
    existing = dest.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    real = Path(os.path.realpath(existing))
    # the root not made yet: nothing below its deepest existing ancestor exists, so no link either
    if not _inside(real, top) and not _inside(top, real):
        link = next((p for p in (existing, *existing.parents) if p.is_symlink()), existing)
        raise WriteError(
            f"refusing to write {dest}: {link} is a symlink to {os.path.realpath(link)}, outside "
            f"the output directory {top}; remove the link (or make it a plain directory) and run "
            "again"
        )
    return dest


def _create_fresh(tmp: Path) -> None:
    """Create ``tmp`` as a new, empty regular file; never through a link planted under its name."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    if tmp.is_symlink() or tmp.exists():
        # a link is removed, its target untouched; a stale file of a reused pid likewise
        tmp.unlink()
    os.close(os.open(tmp, flags, 0o666))


def _free_bytes(directory: Path) -> int | None:
    try:
        st = os.statvfs(directory)
    except (OSError, AttributeError):
        return None
    return st.f_bavail * st.f_frsize


def write_failed(dest: PathLike, error: OSError | str) -> WriteError:
    """The ``WriteError`` for a write of ``dest`` the OS refused: the file, the reason, the free
    space, the fix."""
    dest = Path(dest)
    reason = (
        error if isinstance(error, str) else (error.strerror or f"{type(error).__name__}: {error}")
    )
    free = _free_bytes(dest.parent if dest.parent.exists() else Path("."))
    room = "" if free is None else f", {free:,} bytes free there"
    return WriteError(
        f"could not write {dest} ({reason}{room}); the previous {dest.name}, if any, is kept "
        "whole. Free space on that disk (or lift the quota), or write to another directory"
    )


@contextlib.contextmanager
def atomic_path(
    dest: PathLike, *, suffix: str = "", durable: bool = True, root: PathLike | None = None
) -> Iterator[Path]:
    """Yield a temporary path beside ``dest``; when the block ends without an error, the file
    written there replaces ``dest`` atomically (after an fsync of the file and, for ``durable``,
    of the directory). On an error the temporary file is removed and ``dest`` is left as it was.

    suffix: appended to the temporary name, for writers that add or require an extension
    (``np.savez`` wants ``.npz``). A leftover temporary of ``dest`` from a process killed mid-write
    is removed after the next successful write. root: the output directory ``dest`` must stay inside
    (module docstring). An ``OSError`` of the write (a full disk …) becomes a ``WriteError`` naming
    the file; a ``WriteError`` or an error of the caller's own passes as it is."""
    dest = Path(dest)
    if root is not None:
        confine(dest, root)
    tmp = temp_name(dest, suffix)
    try:
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            _create_fresh(tmp)
        except OSError as e:
            raise write_failed(dest, e) from e
        if root is not None:
            confine(dest, root)  # the directories did not change under us
        try:
            yield tmp
        except OSError as e:
            # a refusal has one of REFUSED's errnos, or none at all: numpy's and PIL's short writes
            # ("88800 requested and 30720 written") carry no errno; any other is the caller's own (a
            # missing input …)
            if isinstance(e, WriteError) or (e.errno is not None and e.errno not in REFUSED):
                raise
            raise write_failed(dest, e) from e
        try:
            if durable:
                _fsync_file(tmp)
            _replace(tmp, dest)
        except OSError as e:
            raise write_failed(dest, e) from e
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(dest.parent)
    for stale in dest.parent.glob(f".{dest.name}.*.tmp*"):  # left by a process killed mid-write
        if not _writer_alive(stale, dest):
            with contextlib.suppress(OSError):
                stale.unlink()


def atomic_write(
    dest: PathLike, data: str | bytes, *, durable: bool = False, root: PathLike | None = None
) -> Path:
    """Write ``data`` (text as UTF-8, or bytes) to ``dest`` atomically (confined to ``root`` when
    given); returns ``dest`` as a Path."""
    with atomic_path(dest, durable=durable, root=root) as tmp:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
    return Path(dest)
