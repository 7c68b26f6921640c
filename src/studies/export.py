"""Copy a sweep's finished runs, without checkpoints, into a study's ``runs/`` folder (and back).

A study runs in a sweep directory outside the work tree (checkpoints are large). Between
stretches of work the *small* files of every finished job are committed under
``experiments/<nn>_<name>/runs/<sweep>/``, so any machine can recompute the report from the
repository, or continue the sweep: ``--restore`` copies them into an empty or partial sweep
directory, and ``sweep_resume`` then skips the jobs that completed (their ``.sweep_job.json``
stamp and ``metrics.json`` are among the files kept) and runs the rest.

::

    python -m src.studies.export $HOME/studies/norm/cpu experiments/01_norm_placement/runs/main
    python -m src.studies.export --restore experiments/01_norm_placement/runs/main $HOME/studies/norm/cpu

Kept per job: ``.hydra/`` (the resolved config and overrides), ``metrics.json``, the CSV log
(``csv/``), ``.sweep_job.json`` and the small JSON files a report reads (``budget.json``,
``ngram.json``, ``grad_norms.json``, ``extrapolation.json``, ``synthetic.json``,
``match_params.json``); per sweep: ``multirun.yaml``, ``seeds_plan.json`` (the confirm stage's
choice of seeds, which the report quotes) and ``study_commands.sh``. Never checkpoints, never a
previous attempt (``attempts/``), never a job without ``metrics.json`` (still running or
interrupted: the sweep reruns it). A finished job without ``.hydra/config.yaml`` cannot be read,
so it is not exported either: the command names it in a warning. Symlinks in the source are not
followed (named in a warning, their targets not copied).

The sweep's ``study_commands.sh`` is merged into the committed one (the entries it lacks added),
so several sweep directories can export into one ``runs/`` folder without losing or repeating a
command. Each exported job mirrors its source: a file of that job's directory in ``runs/`` that
the sweep no longer has (a CSV log of an earlier attempt) is removed, and named; other jobs and
other sweeps' files are never touched. A restore never overwrites a file.

Every file is written by ``src.files`` (atomically, confined to the destination), so nothing is
written through a symlink: a link in the destination where a kept file goes is replaced by the
file; a link elsewhere inside an exported job's directory is removed (the link, never its
target); a link at or above a job's directory is refused. A restore counts a link in the sweep
directory, dangling or not, as present: it never writes through it, and names it. A destination
that is the source (or inside it, or contains it), a file, or a place that cannot be written is one
line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from src.errors import WriteError
from src.files import atomic_path, atomic_write
from src.jsonfile import METRICS
from src.studies.runs import find_run_dirs, unreadable_run_dirs

KEEP_DIRS = (".hydra", "csv")
# every command a study ran (src.study appends), merged on export, never overwritten
COMMANDS = "study_commands.sh"
#: the confirm stage's choice of seeds (``src.reporting.planning.SEEDS_PLAN``, a layer above)
SEEDS_PLAN = "seeds_plan.json"
#: the sweep's own files, copied to the top of the runs folder (``COMMANDS`` is merged instead)
SWEEP_FILES = ("multirun.yaml", SEEDS_PLAN)
KEEP_FILES = (
    METRICS,
    ".sweep_job.json",
    "budget.json",
    "ngram.json",
    "grad_norms.json",
    "extrapolation.json",
    "synthetic.json",
    "match_params.json",
    COMMANDS,
    "multirun.yaml",
)
MAX_FILE_BYTES = 5_000_000  # a kept file larger than this is not a "small file": refused, named


@dataclass(frozen=True)
class Exported:
    jobs: int
    files: int
    removed: list[Path]  # files (and links) of exported jobs in the runs folder the sweep lacks
    unreadable: list[Path]  # finished jobs without .hydra/config.yaml, not exported
    links: list[Path]  # symlinks in the sweep, not followed


@dataclass(frozen=True)
class Restored:
    """Unpacks as ``copied, kept``."""

    copied: int
    kept: int  # already there (a file, or a link, dangling or not), left as it was
    links: list[Path] = field(default_factory=list)  # links in the sweep dir, not written through

    def __iter__(self) -> Iterator[int]:
        return iter((self.copied, self.kept))


def finished_jobs(sweep: Path) -> Iterator[Path]:
    """The run directories below ``sweep`` (``find_run_dirs``: not nested in another run, so never a
    previous attempt) that hold a ``metrics.json``."""
    for job in find_run_dirs([sweep]):
        if (job / METRICS).is_file():
            yield job


def regular_files(top: Path) -> tuple[list[Path], list[Path]]:
    """(the regular files below ``top``, the symlinks there), sorted; links are not followed."""
    files: list[Path] = []
    links: list[Path] = []
    for d, dirs, names in os.walk(top):  # followlinks=False: a linked directory is not entered
        for name in dirs + names:
            p = Path(d) / name
            if p.is_symlink():
                links.append(p)
            elif name in names and p.is_file():
                files.append(p)
    return sorted(files), sorted(links)


def small_files(job: Path) -> tuple[list[Path], list[Path]]:
    """(the job's files an export keeps, the symlinks among them, not followed)."""
    files: list[Path] = []
    links: list[Path] = []
    for name in KEEP_FILES:
        p = job / name
        if p.is_symlink():
            links.append(p)
        elif p.is_file():
            files.append(p)
    for d in KEEP_DIRS:
        if (job / d).is_symlink():
            links.append(job / d)
        elif (job / d).is_dir():
            f, ln = regular_files(job / d)
            files += f
            links += ln
    return files, links


def command_entries(text: str) -> list[str]:
    """A ``study_commands.sh`` split into its entries: a ``# <time>`` line and the command lines
    under it."""
    entries: list[str] = []
    for line in text.splitlines():
        if line.startswith("#") or not entries:
            entries.append(line + "\n")
        else:
            entries[-1] += line + "\n"
    return entries


def merge_commands(src: Path, dest: Path, root: Path | None = None) -> int:
    """Add to ``dest`` the entries of ``src`` it lacks, in ``src``'s order (the whole file rewritten
    atomically, confined to ``root``; a link at ``dest`` is replaced, never read or followed). ->
    how many were added.

    A sweep restored from ``runs/`` holds the committed history plus what ran since, and a study may
    run in several sweep directories that export into one ``runs/`` folder: overwriting the
    committed file would lose the other sweeps' commands, appending it whole would write them
    twice."""
    before = dest.read_text() if dest.is_file() and not dest.is_symlink() else ""
    have = set(command_entries(before))
    new = [e for e in command_entries(src.read_text()) if e not in have]
    if new:
        sep = "\n" if before and not before.endswith("\n") else ""
        atomic_write(dest, before + sep + "".join(new), root=dest.parent if root is None else root)
    return len(new)


def _apart(source: Path, dest: Path, what: str, fix: str) -> None:
    """Make the directory ``dest``; a ``WriteError`` naming it and the fix when it is ``source``,
    lies inside it or contains it, is a file, or cannot be written. what: ``dest``'s role."""
    s, d = Path(os.path.realpath(source)), Path(os.path.realpath(dest))
    where = {s == d: "is", s in d.parents: "lies inside", d in s.parents: "contains"}.get(True)
    if where:
        raise WriteError(f"{what} {dest} {where} the source {source} ({s}); {fix}")
    if os.path.lexists(dest) and not dest.is_dir():
        raise WriteError(
            f"{what} {dest} is a file, not a directory; move the file away or give a directory"
        )
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise WriteError(
            f"cannot create {what} {dest} ({e.strerror or e}); give a directory you can write to "
            "(or fix the permissions of its parent)"
        ) from e
    if not os.access(dest, os.W_OK | os.X_OK):
        raise WriteError(
            f"cannot write into {what} {dest} (permission denied); give a directory you can "
            "write to (or fix its permissions)"
        )


def _link_on_the_way(root: Path, path: Path) -> Path | None:
    """The first symlink among ``path`` and its directories below ``root`` (lexically), if any."""
    rel = path.relative_to(root).parts
    for i in range(1, len(rel) + 1):
        p = root.joinpath(*rel[:i])
        if p.is_symlink():
            return p
    return None


def _copy(src: Path, target: Path, root: Path) -> None:
    with atomic_path(target, durable=False, root=root) as tmp:
        shutil.copy2(src, tmp)


def mirror(job_dest: Path, keep: set[str], *, shared: bool = False) -> list[Path]:
    """Remove from ``job_dest`` every file and link whose path (relative, posix) is not in ``keep``,
    and the directories left empty. A link is removed itself (unless it stands where a kept file
    goes: the write replaces it); a nested run directory (another job) is never entered. shared: the
    job is the sweep itself, whose folder holds other sweeps' files: only ``KEEP_DIRS`` are
    mirrored. -> what was removed."""
    parents = {p for k in keep for p in Path(k).parents}
    removed: list[Path] = []

    def walk(d: Path, rel: Path) -> None:
        for entry in sorted(os.scandir(d), key=lambda e: e.name):
            p, r = Path(entry.path), rel / entry.name
            if shared and rel == Path() and entry.name not in KEEP_DIRS:
                continue
            if entry.is_symlink() or not entry.is_dir(follow_symlinks=False):
                if r.as_posix() not in keep:
                    p.unlink()
                    removed.append(p)
            elif r.as_posix() in keep:  # a directory where the source has a file
                shutil.rmtree(p)
                removed.append(p)
            elif not (p / ".hydra" / "config.yaml").is_file():
                walk(p, r)
                if r not in parents and not any(os.scandir(p)):
                    p.rmdir()

    if job_dest.is_dir() and not job_dest.is_symlink():
        walk(job_dest, Path())
    return removed


def export(sweep: Path, dest: Path) -> Exported:
    """Copy the finished jobs' small files from ``sweep`` to ``dest`` (same relative paths), each
    job's directory there mirroring the sweep's (module docstring)."""
    if not sweep.is_dir():
        raise FileNotFoundError(f"sweep directory {sweep} does not exist")
    _apart(
        sweep,
        dest,
        "the runs folder",
        "give a runs folder outside the sweep (experiments/<nn>_<name>/runs/<sweep>)",
    )
    top = sweep.resolve()
    runs = find_run_dirs([sweep])
    jobs = [job for job in runs if (job / METRICS).is_file()]
    planned: list[tuple[Path, Path, list[Path]]] = []  # (job, its directory in dest, its files)
    links: list[Path] = []
    for job in jobs:  # every check before the first write: a refused export writes nothing
        files, job_links = small_files(job)
        links += job_links
        for f in files:
            size = f.stat().st_size
            if size > MAX_FILE_BYTES:
                raise ValueError(
                    f"{f} is {size / 1e6:.1f} MB, not a small file; the export keeps configs, "
                    "metrics and CSV logs only (raise src.studies.export.MAX_FILE_BYTES if a CSV "
                    "log is really this long)"
                )
        job_dest = dest / job.relative_to(top)
        link = _link_on_the_way(dest, job_dest)
        if link is not None:
            raise WriteError(
                f"refusing to export {job} into {job_dest}: {link} is a symlink (to "
                f"{os.readlink(link)}); the runs folder holds plain directories only: remove the "
                "link and run again"
            )
        planned.append((job, job_dest, files))
    for name in SWEEP_FILES:  # the sweep's copies are the newer ones
        if (sweep / name).is_symlink():
            links.append(sweep / name)
        elif (sweep / name).is_file():
            _copy(sweep / name, dest / name, dest)
    if (sweep / COMMANDS).is_file() and not (sweep / COMMANDS).is_symlink():
        merge_commands(sweep / COMMANDS, dest / COMMANDS, dest)
    removed: list[Path] = []
    n_files = 0
    for job, job_dest, files in planned:
        keep = {f.relative_to(job).as_posix() for f in files}
        removed += mirror(job_dest, keep, shared=job_dest == dest)
        for f in files:
            if job_dest == dest and f.name in (*SWEEP_FILES, COMMANDS) and f.parent == job:
                continue  # a sweep that is one run: its sweep files are written above
            _copy(f, job_dest / f.relative_to(job), dest)
            n_files += 1
    unreadable = unreadable_run_dirs([sweep], runs)
    return Exported(len(jobs), n_files, removed, unreadable, sorted(set(links)))


def restore(runs: Path, sweep: Path) -> Restored:
    """Copy committed runs into a sweep directory so the sweep resumes from them; never overwrites
    (a file there, or a link, dangling or not, counts as present; a linked directory is not
    entered)."""
    if not runs.is_dir():
        raise FileNotFoundError(f"runs folder {runs} does not exist")
    _apart(
        runs,
        sweep,
        "the sweep directory",
        "restore into a sweep directory outside the runs folder (the study's hydra.sweep.dir)",
    )
    copied = kept = 0
    links: set[Path] = set()
    for src in regular_files(runs)[0]:
        target = sweep / src.relative_to(runs)
        link = _link_on_the_way(sweep, target)
        if link is not None:
            links.add(link)
        if link is not None or os.path.lexists(target):
            kept += 1
            continue
        _copy(src, target, sweep)
        copied += 1
    return Restored(copied, kept, sorted(links))


def _names(paths: Sequence[Path], top: Path) -> str:
    return ", ".join(str(p.relative_to(top)) if p.is_relative_to(top) else str(p) for p in paths)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m src.studies.export", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "source",
        type=Path,
        help="the sweep directory (or, with --restore, the committed runs folder)",
    )
    p.add_argument(
        "dest", type=Path, help="the runs folder (or, with --restore, the sweep directory)"
    )
    p.add_argument(
        "--restore",
        action="store_true",
        help="copy committed runs into a sweep directory (never overwrites)",
    )
    args = p.parse_args(argv)
    prog = "python -m src.studies.export"
    try:
        if args.restore:
            r = restore(args.source, args.dest)
            print(
                f"restored {r.copied} files into {args.dest} ({r.kept} already there, left as they "
                "were)"
            )
            if r.links:
                print(
                    f"{prog}: warning: not written through {len(r.links)} symlink(s) in "
                    f"{args.dest}: {_names(r.links, args.dest)}; replace each with the directory "
                    "or file it stands for and restore again to fill them",
                    file=sys.stderr,
                )
        else:
            e = export(args.source, args.dest)
            for path in e.removed:
                print(f"removed {path} (the sweep's job no longer has it)")
            print(
                f"exported {e.jobs} finished jobs ({e.files} files, no checkpoints) to "
                f"{args.dest}" + (f", removed {len(e.removed)} stale files" if e.removed else "")
            )
            top = args.source.resolve()
            if e.unreadable:
                print(
                    f"{prog}: warning: {len(e.unreadable)} finished job(s) not exported, with a "
                    f"metrics.json but no .hydra/config.yaml: {_names(e.unreadable, top)}; restore "
                    "their .hydra/ folder (or re-run them) and export again",
                    file=sys.stderr,
                )
            if e.links:
                print(
                    f"{prog}: warning: {len(e.links)} symlink(s) in the sweep not followed (their "
                    f"targets not exported): {_names(e.links, top)}; replace each with a "
                    "copy of its target to export it",
                    file=sys.stderr,
                )
    except (FileNotFoundError, ValueError, WriteError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(
            f"{prog}: {e.filename or ''}: {e.strerror or e}; check that path and its permissions",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
