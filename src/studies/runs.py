"""Read a sweep's run directories and group them into variants (the same overrides but the seed).

A run directory (docs/CONTRACTS.md) holds ``.hydra/config.yaml``, ``.hydra/overrides.yaml``,
``metrics.json`` (absent while running or after a kill), ``csv/version_*/metrics.csv`` and
optionally ``grad_norms.json``, ``extrapolation.json``, ``synthetic.json``, ``match_params.json``,
``budget.json`` and evaluation directories (``src.eval`` with ``hydra.run.dir=<run
dir>/eval_<name>``), whose flat ``<task>/<metric>`` figures are merged into the run's metrics.

Every directory below the given roots with ``.hydra/config.yaml`` is a run, except those
nested inside another run (evaluations, previous attempts).

Figures derived from a run's files join its metrics, so they are reported like any other:
``grad_norm/<stack>.<kind>@<layer>`` (the per-layer gradient norms at the first recorded
step) and ``grad_norm/<stack>.<kind>.last_over_first`` (last layer / first layer).
"""

from __future__ import annotations

import csv
import json
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from src.errors import DataError
from src.jsonfile import METRICS

#: Overrides that never define a variant (seeds are repeats; protocol.stage labels a job; the rest
#: only move files around).
IGNORED_KEYS = (
    "seed",
    "hydra.",
    "paths.",
    "ckpt_path",
    "sweep_resume.",
    "protocol.",
    "report.",
    "trainer.enable_progress_bar",
    "trainer.enable_model_summary",
)
BUDGET = "budget.json"


@dataclass
class Point:
    step: int  # optimizer steps done
    value: float


@dataclass
class RunRecord:
    """One run directory, read."""

    path: Path
    overrides: dict[str, str]  # key -> value as typed on the command line (leading +/~ dropped)
    config: dict[str, Any]  # .hydra/config.yaml (interpolations unresolved)
    # metrics.json (plus merged evaluation figures); None: no metrics.json
    metrics: dict[str, Any] | None
    job_num: int = 0
    first_started: float | None = (
        None  # when the job first ran (src/runs/resume.py stamp), for the sweep order
    )
    val_history: list[Point] = field(default_factory=list)
    train_history: list[Point] = field(default_factory=list)
    grad_norms: dict[str, Any] | None = None
    extrapolation: dict[str, Any] | None = None
    match: dict[str, Any] | None = None
    budget: dict[str, Any] | None = (
        None  # budget.json: params, FLOPs per token, planned tokens (src/training/budget.py)
    )
    #: an evaluation-time variant's run (src/studies/eval_variants.py): the training run whose
    #: weights it scores
    evaluation_of: RunRecord | None = field(default=None, repr=False, compare=False)

    @property
    def status(self) -> str:
        """completed | failed | incomplete (no metrics.json: interrupted or still running)."""
        if self.metrics is None:
            return "incomplete"
        return str(self.metrics.get("status") or "incomplete")

    @property
    def seed(self) -> Any:
        return self.overrides.get("seed", self.config.get("seed"))

    def metric(self, key: str) -> float | None:
        v = (self.metrics or {}).get(key)
        try:
            return float(v) if v is not None else None
        except (TypeError, ValueError):
            return None

    @property
    def tokens_per_step(self) -> float | None:
        tokens, steps = self.metric("tokens_seen"), self.metric("global_step")
        return tokens / steps if tokens and steps else None


# --------------------------------------------------------------------------- reading
def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None


def _damaged(path: Path, what: str) -> DataError:
    run = next((p for p in path.parents if (p / ".hydra").is_dir()), path.parent)
    return DataError(
        f"{path}: {what}; the run's record is damaged. Restore the file, or move the run directory "
        f"{run} out of the directories given to the report (re-run that job to replace it)"
    )


def read_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when the file does not exist. A file that is there but is
    not a JSON object (torn, hand-edited, a list) is a ``DataError`` naming it: a run's record never
    goes missing silently (a torn metrics.json must not make a completed run count as
    incomplete)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise _damaged(path, f"cannot be read ({type(e).__name__}: {e})") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise _damaged(path, f"is not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise _damaged(path, f"holds a JSON {type(data).__name__}, not an object")
    return data


def read_overrides(path: Path) -> list[str]:
    """``.hydra/overrides.yaml``: the list of overrides Hydra wrote. A missing, torn or non-list
    file is a ``DataError`` naming it, never a variant of its own ("(defaults)" or a garbled
    one)."""
    if not path.is_file():
        raise _damaged(path, "is missing (Hydra writes it for every run, with the run's overrides)")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise _damaged(
            path, f"cannot be parsed ({type(e).__name__}: {str(e).splitlines()[0]})"
        ) from None
    if data is None:
        return []  # Hydra writes "[]" for no overrides; an empty file is read the same way
    if not isinstance(data, list) or not all(isinstance(o, str) for o in data):
        raise _damaged(
            path,
            f"holds {type(data).__name__} {str(data)[:80]!r}, not a list of overrides (key=value)",
        )
    return data


def parse_override(text: str) -> tuple[str, str]:
    """``+model/position=rope`` -> (``model/position``, ``rope``); ``~key`` -> (``key``,
    ``<deleted>``)."""
    text = str(text)
    if text.startswith("~"):
        key, _, value = text[1:].partition("=")
        return key, "<deleted>" if not value else f"<deleted {value}>"
    key, _, value = text.lstrip("+").partition("=")
    return key, value


def csv_log_rows(run_dir: Path) -> Iterator[tuple[Path, int, int, dict[str, str]]]:
    """``(file, line, step, row)`` of every complete row with a numeric ``step`` in the run's
    ``csv/version_*/metrics.csv``, in version order (a resumed run logs to a new version, so a later
    row for the same step wins); the last row of a file without a final newline (the row a running
    job is writing now) is left out. An unreadable file is a ``DataError`` naming it."""
    files = sorted(
        run_dir.glob("csv/version_*/metrics.csv"),
        key=lambda p: int(p.parent.name.split("_")[-1] or 0),
    )
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise _damaged(f, f"cannot be read ({type(e).__name__}: {e})") from None
        rows = list(csv.DictReader(text.splitlines()))
        for line, row in enumerate(rows, start=2):
            if line - 1 == len(rows) and not text.endswith("\n"):
                continue  # the row a running job is writing now
            try:
                step = int(float(row.get("step") or "nan"))
            except ValueError:
                continue
            yield f, line, step, row


def read_csv_history(run_dir: Path) -> tuple[list[Point], list[Point]]:
    """(validation loss, training loss) points from every ``csv/version_*/metrics.csv`` in version
    order (``csv_log_rows``). Lightning logs validation at ``step = global_step - 1``; the points
    here count optimizer steps done."""
    val: dict[int, float] = {}
    train: dict[int, float] = {}
    for f, line, step, row in csv_log_rows(run_dir):
        for key, into in (("val/loss", val), ("train/loss", train)):
            cell = row.get(key)
            if cell in (None, ""):
                continue
            try:
                into[step + 1] = float(cell)
            except ValueError:
                raise _damaged(
                    f, f"line {line}, column {key} holds {cell!r}, not a number"
                ) from None
    return (
        [Point(s, v) for s, v in sorted(val.items())],
        [Point(s, v) for s, v in sorted(train.items())],
    )


def _eval_figures(run_dir: Path) -> dict[str, Any]:
    """Flat numeric ``<benchmark>/<metric>`` figures of evaluations stored inside the run
    directory (an evaluation's metrics.json holds ``benchmarks``; one written by an older version
    of ``src.eval`` holds ``tasks``)."""
    out: dict[str, Any] = {}
    for m in sorted(run_dir.glob(f"*/{METRICS}")):
        data = read_object(m)
        evaluated = data and ("benchmarks" in data or "tasks" in data)
        if not evaluated or data.get("status") != "completed":
            continue
        for k, v in data.items():
            if "/" in k and isinstance(v, (int, float)) and not isinstance(v, bool):
                out[k] = v
    return out


def synthetic_reasons(synthetic: dict[str, Any] | None) -> dict[str, str]:
    """``test/<figure>@<length>_reason`` for each test length of a synthetic task that has no
    figures (``synthetic.json``'s note: a learned position table shorter than the sequence), so the
    report says why the run's null ``test/exact_match@<length>`` is missing
    (``render.not_applicable``)."""
    out: dict[str, str] = {}
    for length, f in ((synthetic or {}).get("test") or {}).items():
        if isinstance(f, dict) and f.get("note"):
            for name in ("loss", "token_acc", "exact_match"):
                out[f"test/{name}@{length}_reason"] = str(f["note"])
    return out


def grad_norm_figures(grad_norms: dict[str, Any] | None) -> dict[str, float]:
    """Flat figures of ``grad_norms.json`` at its first recorded step (module docstring)."""
    if not grad_norms:
        return {}
    out: dict[str, float] = {}
    step = min(grad_norms, key=lambda s: int(s))
    for stack, kinds in sorted(grad_norms[step].items()):
        for kind, norms in sorted(kinds.items()):
            if not isinstance(norms, list) or not norms:
                continue
            for i, v in enumerate(norms):
                out[f"grad_norm/{stack}.{kind}@{i}"] = float(v)
            if norms[0]:
                out[f"grad_norm/{stack}.{kind}.last_over_first"] = float(norms[-1]) / float(
                    norms[0]
                )
    return out


def read_run(run_dir: Path) -> RunRecord:
    hydra_dir = run_dir / ".hydra"
    overrides = dict(parse_override(o) for o in read_overrides(hydra_dir / "overrides.yaml"))
    config = _read_yaml(hydra_dir / "config.yaml") or {}
    hydra_cfg = _read_yaml(hydra_dir / "hydra.yaml") or {}
    job_num = (
        (((hydra_cfg.get("hydra") or {}).get("job") or {}).get("num"))
        if isinstance(hydra_cfg, dict)
        else None
    )
    metrics = read_object(run_dir / METRICS)
    extrapolation = read_object(run_dir / "extrapolation.json")
    grad_norms = read_object(run_dir / "grad_norms.json")
    if metrics is not None:
        derived = {
            **_eval_figures(run_dir),
            **grad_norm_figures(grad_norms),
            **synthetic_reasons(read_object(run_dir / "synthetic.json")),
        }
        metrics = {**metrics, **{k: v for k, v in derived.items() if k not in metrics}}
    val, train = read_csv_history(run_dir)
    stamp = read_object(run_dir / ".sweep_job.json") or {}
    first = stamp.get("first_started", stamp.get("started"))
    return RunRecord(
        path=run_dir,
        overrides=overrides,
        config=config if isinstance(config, dict) else {},
        metrics=metrics,
        job_num=int(job_num) if str(job_num).isdigit() else 0,  # '???' outside a multirun
        first_started=float(first) if first else None,
        val_history=val,
        train_history=train,
        grad_norms=grad_norms,
        extrapolation=extrapolation,
        match=read_object(run_dir / "match_params.json"),
        budget=read_object(run_dir / BUDGET),
    )


def find_run_dirs(roots: Iterable[str | Path]) -> list[Path]:
    """Directories with ``.hydra/config.yaml`` below ``roots`` (a root may itself be a run),
    except those nested in another run."""
    found: set[Path] = set()
    for root in roots:
        root = Path(root)
        if not root.exists():
            raise FileNotFoundError(
                f"{root} does not exist; give a sweep directory (hydra.sweep.dir) or a run "
                "directory"
            )
        for cfg in root.rglob(".hydra/config.yaml"):
            found.add(cfg.parent.parent.resolve())
    runs = sorted(found, key=lambda p: (len(p.parts), str(p)))
    kept: list[Path] = []
    for p in runs:
        if not any(k in p.parents for k in kept):
            kept.append(p)
    return sorted(kept)


def unreadable_run_dirs(
    roots: Iterable[str | Path], runs: Sequence[Path] | None = None
) -> list[Path]:
    """Finished jobs that are not runs: directories below ``roots`` holding a ``metrics.json`` but no
    ``.hydra/config.yaml``, outside every run (not an evaluation, not a previous attempt) and outside
    each other. Nothing can group them into a variant, so readers name them rather than drop them.
    runs: ``find_run_dirs(roots)``, when the caller has it."""
    roots = [Path(r) for r in roots]
    runs = find_run_dirs(roots) if runs is None else runs
    found = {
        m.parent.resolve()
        for root in roots
        for m in root.rglob(METRICS)
        if "attempts" not in m.relative_to(root).parts
    }
    inside = set(runs)  # a directory in (or below) one of these is no job of its own
    kept: list[Path] = []
    for p in sorted(found, key=lambda p: (len(p.parts), str(p))):
        if p not in inside and not any(a in inside for a in p.parents):
            kept.append(p)
            inside.add(p)
    return sorted(kept)


def load_runs(roots: Iterable[str | Path]) -> list[RunRecord]:
    roots = list(roots)
    dirs = find_run_dirs(roots)
    runs = [read_run(d) for d in dirs]
    unreadable = unreadable_run_dirs(roots, dirs)
    if unreadable:
        warnings.warn(
            f"{len(unreadable)} finished job(s) left out, with a metrics.json but no "
            f".hydra/config.yaml to say which variant they ran: {', '.join(map(str, unreadable))}; "
            "restore their .hydra/ folder (or re-run those jobs) to count them",
            stacklevel=2,
        )
    if not runs:
        raise FileNotFoundError(
            f"no run directories (with .hydra/config.yaml) under {', '.join(map(str, roots))}"
        )
    return runs


# --------------------------------------------------------------------------- grouping
def is_ignored(key: str, ignore: Sequence[str] = IGNORED_KEYS) -> bool:
    return any(key == k or (k.endswith(".") and key.startswith(k)) for k in ignore)


def config_value(config: dict[str, Any], key: str) -> str | None:
    """The value a run's config holds for an override key (``optim.lr`` -> 0.003; a group
    ``model/position`` -> its node's ``name``), as text; None when absent."""
    node: Any = config
    for part in key.replace("/", ".").split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    if isinstance(node, dict):
        node = node.get("name")
    return None if node is None else str(node)


@dataclass
class Variant:
    """Runs that share every override but the ignored ones (seed …)."""

    key: tuple[tuple[str, str], ...]  # the variant-defining overrides, sorted
    runs: list[RunRecord]
    # varying keys this variant did not override: config values
    implied: dict[str, str] = field(default_factory=dict)

    def values(self) -> dict[str, str]:
        """Override values, plus the config's value for varying keys the variant left at their
        default."""
        return {**self.implied, **dict(self.key)}

    def label(self, keys: Sequence[str]) -> str:
        d = self.values()
        parts = [f"{k}={d[k]}" for k in keys if k in d]
        return ", ".join(parts) or "(defaults)"

    @property
    def seeds(self) -> list[Any]:
        return [r.seed for r in self.runs]


def group_runs(
    runs: Sequence[RunRecord], ignore: Sequence[str] = IGNORED_KEYS
) -> tuple[list[Variant], list[str], dict[str, str]]:
    """(variants in sweep order, the keys that vary between variants, the keys shared by all).

    Sweep order: by when each variant's first job first ran (the resume stamp; several sweeps
    into one directory keep their order), then job number and path, so the report lists
    variants as the sweeps ran them.
    """
    groups: dict[tuple[tuple[str, str], ...], list[RunRecord]] = {}
    inf = float("inf")
    for r in sorted(runs, key=lambda r: (r.first_started or inf, r.job_num, str(r.path))):
        key = tuple(sorted((k, v) for k, v in r.overrides.items() if not is_ignored(k, ignore)))
        groups.setdefault(key, []).append(r)
    variants = [Variant(k, sorted(v, key=lambda r: str(r.seed))) for k, v in groups.items()]
    all_keys: list[str] = []
    for v in variants:
        for k, _ in v.key:
            if k not in all_keys:
                all_keys.append(k)
    varying = [k for k in all_keys if len({dict(v.key).get(k) for v in variants}) > 1]
    shared = {
        k: dict(variants[0].key)[k]
        for k in all_keys
        if k not in varying and k in dict(variants[0].key)
    }
    for v in variants:  # e.g. a follow-up sweep with optim.lr=1e-2 next to runs at the config's lr
        for k in varying:
            if k not in dict(v.key):
                value = config_value(v.runs[0].config, k)
                if value is not None:
                    v.implied[k] = value
    return variants, varying, shared


def finite(values: Iterable[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]
