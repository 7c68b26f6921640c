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
``match_params.json``). Never checkpoints, never a previous attempt (``attempts/``), never a job
without ``metrics.json`` (still running or interrupted: the sweep reruns it). A restore never
overwrites a file. The sweep's ``study_commands.sh`` is merged into the committed one (the entries
it lacks appended), so several sweep directories can export into one ``runs/`` folder without losing
or repeating a command."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from src.jsonfile import METRICS
from src.studies.runs import find_run_dirs

KEEP_DIRS = (".hydra", "csv")
# every command a study ran (src.study appends), merged on export, never overwritten
COMMANDS = "study_commands.sh"
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


def finished_jobs(sweep: Path) -> Iterator[Path]:
    """The run directories below ``sweep`` (``find_run_dirs``: not nested in another run, so never a
    previous attempt) that hold a ``metrics.json``."""
    for job in find_run_dirs([sweep]):
        if (job / METRICS).is_file():
            yield job


def small_files(job: Path) -> Iterator[Path]:
    for name in KEEP_FILES:
        if (job / name).is_file():
            yield job / name
    for d in KEEP_DIRS:
        if (job / d).is_dir():
            yield from (p for p in sorted((job / d).rglob("*")) if p.is_file())


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


def merge_commands(src: Path, dest: Path) -> int:
    """Append to ``dest`` the entries of ``src`` it lacks, in ``src``'s order. -> how many were
    appended.

    A sweep restored from ``runs/`` holds the committed history plus what ran since, and a study may
    run in several sweep directories that export into one ``runs/`` folder: overwriting the
    committed file would lose the other sweeps' commands, appending it whole would write them
    twice."""
    before = dest.read_text() if dest.is_file() else ""
    have = set(command_entries(before))
    new = [e for e in command_entries(src.read_text()) if e not in have]
    if new:
        with dest.open("a") as f:
            f.write("\n" if before and not before.endswith("\n") else "")
            f.writelines(new)
    return len(new)


def export(sweep: Path, dest: Path) -> tuple[int, int]:
    """Copy the finished jobs' small files from ``sweep`` to ``dest`` (same relative paths). ->
    (jobs, files)."""
    if not sweep.is_dir():
        raise FileNotFoundError(f"sweep directory {sweep} does not exist")
    jobs = files = 0
    if (
        sweep / "multirun.yaml"
    ).is_file():  # the last multirun's config: the sweep's copy is the newer one
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(sweep / "multirun.yaml", dest / "multirun.yaml")
    if (sweep / COMMANDS).is_file():
        dest.mkdir(parents=True, exist_ok=True)
        merge_commands(sweep / COMMANDS, dest / COMMANDS)
    for job in finished_jobs(sweep):
        jobs += 1
        for src in small_files(job):
            size = src.stat().st_size
            if size > MAX_FILE_BYTES:
                raise ValueError(
                    f"{src} is {size / 1e6:.1f} MB, not a small file; the export keeps configs, "
                    "metrics and CSV logs only (raise src.studies.export.MAX_FILE_BYTES if a CSV "
                    "log is really this long)"
                )
            target = dest / src.relative_to(sweep.resolve())
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
            files += 1
    return jobs, files


def restore(runs: Path, sweep: Path) -> tuple[int, int]:
    """Copy committed runs into a sweep directory so the sweep resumes from them; never overwrites.
    -> (copied, kept)."""
    if not runs.is_dir():
        raise FileNotFoundError(f"runs folder {runs} does not exist")
    copied = kept = 0
    for src in sorted(p for p in runs.rglob("*") if p.is_file()):
        target = sweep / src.relative_to(runs)
        if target.exists():
            kept += 1
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
        copied += 1
    return copied, kept


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
    try:
        if args.restore:
            copied, kept = restore(args.source, args.dest)
            print(
                f"restored {copied} files into {args.dest} ({kept} already there, left as they "
                "were)"
            )
        else:
            jobs, files = export(args.source, args.dest)
            print(f"exported {jobs} finished jobs ({files} files, no checkpoints) to {args.dest}")
    except (FileNotFoundError, ValueError) as e:
        print(f"python -m src.studies.export: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
