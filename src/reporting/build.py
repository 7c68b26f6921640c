"""The report of a set of runs, end to end: read the runs, resolve the protocol (declared by the
runs, flags on top), tune per variant, decide the comparisons, write report.md, the CSV files and
the plots. ``python -m src.report`` (src/report.py) and ``python -m src.study`` call
``make_report``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from src.errors import ConfigError, check_keys
from src.files import atomic_write
from src.reporting import plots as report_plots
from src.reporting.csv_files import write_all
from src.reporting.families import matching
from src.reporting.probe_plots import probe_curves
from src.reporting.render import render_markdown
from src.reporting.table import DEFAULT_SECONDARY, Report, build_report
from src.studies.eval_variants import eval_variant_runs, without_scaled
from src.studies.protocol import Protocol, merge_protocols
from src.studies.questions import Contrast, Interaction, questions_of
from src.studies.run_checks import check_duplicates, check_units
from src.studies.runs import IGNORED_KEYS, RunRecord, Variant, load_runs
from src.studies.tuning import tune_variants


@dataclass
class ReportFiles:
    report: Report
    runs: list[RunRecord]  # the runs read (not the derived runs of evaluation-time variants)
    markdown: Path
    files: dict[str, Path]  # report.csv, runs.csv, comparisons.csv, tuning.csv, references.csv
    plots: dict[str, Path | None]

    @property
    def csv(self) -> Path:
        return self.files["report.csv"]

    @property
    def runs_csv(self) -> Path:
        return self.files["runs.csv"]


def find_baseline(variants: Sequence[Variant], spec: str | None) -> int:
    """Index of the variant whose values (overrides, else its runs' config) include every
    ``key=value`` of ``spec`` (comma-separated)."""
    if not spec:
        return 0
    wanted = dict(p.split("=", 1) for p in spec.split(",") if "=" in p)
    matches = matching(wanted, variants)
    # the one with the fewest other overrides (a follow-up's extra key does not steal the baseline)
    if matches:
        return min(matches, key=lambda i: (len(variants[i].key), i))
    labels = "; ".join(", ".join(f"{k}={x}" for k, x in v.key) or "(defaults)" for v in variants)
    raise ValueError(f"--baseline {spec!r} matches no variant; variants: {labels}")


def resolve_protocol(
    runs: Sequence[RunRecord],
    *,
    tune: Sequence[str] = (),
    fixed: bool = False,
    metric: str | None = None,
    select: str | None = None,
    design: str | None = None,
    equivalence_margin: float | None = None,
    comparisons: str | None = None,
    secondary: Sequence[str] | None = None,
    baseline: str | None = None,
    test: str | None = None,
    questions: str | Path | None = None,
) -> Protocol:
    """The runs' declared protocol (they must agree), with the given flags applied on top.

    ``fixed``: tune nothing (the declared tuned keys become factors that define variants)."""
    if fixed and tune:
        raise ValueError("--fixed tunes nothing and --tune names a key to tune: give one of them")
    flags = {
        "metric": metric,
        "select": select,
        "design": design,
        "comparisons": comparisons,
        "baseline": baseline,
        "equivalence_margin": equivalence_margin,
        "secondary": secondary,
        "tune": {} if fixed else (tune or None),
        "test": test,
        "primary": questions,
        "interactions": questions,
    }
    declared = merge_protocols(
        [p for r in runs if (p := Protocol.from_config(r.config)) is not None],
        given=[k for k, v in flags.items() if v is not None],
    )
    p = declared or Protocol()
    changes: dict[str, object] = {}
    if tune:
        changes["tune"] = {k: list(p.tune.get(k, [])) for k in tune}
    if fixed:
        changes["tune"] = {}
    if design is None and declared is None:  # labelled stages without a declared protocol
        stages = {
            str((r.config.get("protocol") or {}).get("stage"))
            for r in runs
            if isinstance(r.config.get("protocol"), dict)
        }
        design = "two_stage" if stages & {"tune", "confirm"} else "grid"
    for key, value in (
        ("metric", metric),
        ("select", select),
        ("design", design),
        ("comparisons", comparisons),
        ("baseline", baseline),
        ("equivalence_margin", equivalence_margin),
        ("test", test),
    ):
        if value is not None:
            changes[key] = value
    if questions is not None:
        changes["primary"], changes["interactions"] = read_questions(questions)
        changes["questions_from"] = str(questions)
    if secondary is not None:
        changes["secondary"] = list(secondary)
    elif not p.secondary:
        changes["secondary"] = list(DEFAULT_SECONDARY)
    p = replace(p, **changes)
    p.check()
    return p


def read_questions(path: str | Path) -> tuple[tuple[Contrast, ...], tuple[Interaction, ...]]:
    """``primary:`` and ``interactions:`` from a YAML file (``src.report --questions``): questions
    declared after the runs, which the report labels as such."""
    path = Path(path)
    try:
        node = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(
            f"--questions {path}: {e}; give a YAML file with primary: and/or interactions:"
        ) from None
    if not isinstance(node, Mapping) or not set(node) & {"primary", "interactions"}:
        raise ConfigError(
            f"--questions {path}: expected a mapping with primary: and/or interactions: (docs/studies.md, "
            "'Families')"
        )
    check_keys(node, ["primary", "interactions"], where=f"--questions {path}")
    return questions_of(node)


def make_report(
    roots: Sequence[str | Path],
    out: str | Path | None = None,
    *,
    tune: Sequence[str] = (),
    fixed: bool = False,
    baseline: str | None = None,
    metric: str | None = None,
    select: str | None = None,
    design: str | None = None,
    equivalence_margin: float | None = None,
    comparisons: str | None = None,
    alpha: float = 0.05,
    extra: Sequence[str] | None = None,
    ignore: Sequence[str] = IGNORED_KEYS,
    pairing: str = "auto",
    eval_variants: bool = False,
    stages: Sequence[str] | None = None,
    title: str | None = None,
    test: str | None = None,
    questions: str | Path | None = None,
) -> ReportFiles:
    """Build the report of the runs under ``roots``; write it to ``out`` (default ``roots[0]``).

    ``eval_variants``: each RoPE scaling the runs were also scored with at evaluation time becomes a
    variant of its own, made of derived runs that re-read the same weights
    (src/studies/eval_variants.py). ``stages``: only the runs of these protocol stages (``tune``:
    the tune stage's report while the confirm stage is still running)."""
    runs = load_runs(roots)
    protocol = resolve_protocol(
        runs,
        tune=tune,
        fixed=fixed,
        metric=metric,
        select=select,
        design=design,
        equivalence_margin=equivalence_margin,
        comparisons=comparisons,
        secondary=extra,
        baseline=baseline,
        test=test,
        questions=questions,
    )
    left_out: dict[str, int] | None = None
    if stages:
        kept = [r for r in runs if protocol.stage_of(r.config) in stages]
        if not kept:
            found = sorted({protocol.stage_of(r.config) for r in runs})
            raise ConfigError(
                f"--stages {' '.join(stages)}: none of the {len(runs)} runs is of these stages "
                f"(found: {', '.join(found) or 'none'}); give one of those"
            )
        kept_ids = {id(r) for r in kept}
        left_out = dict(Counter(protocol.stage_of(r.config) for r in runs if id(r) not in kept_ids))
        runs = kept
    # one sample counted twice; losses in two tokenizers' units
    check_duplicates(runs)
    check_units(runs, [protocol.metric])
    derived = eval_variant_runs(runs, [*ignore, *protocol.tune]) if eval_variants else []
    if eval_variants:  # each scaling's figures are its derived variant's extrapolation/* now
        protocol = replace(protocol, secondary=without_scaled(protocol.secondary))
    tuned, varying, shared = tune_variants([*runs, *derived], protocol, ignore)
    base = find_baseline([t.variant for t in tuned], protocol.baseline)
    report = build_report(
        tuned,
        varying,
        shared,
        protocol,
        baseline=base,
        alpha=alpha,
        secondary=protocol.secondary,
        pairing=pairing,
    )
    out_dir = Path(out or roots[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    # an evaluation-time variant trained nothing
    trained = [row for row in report.rows if row.evaluation_of is None]
    plots: dict[str, Path | None] = {
        "validation loss vs tokens": report_plots.loss_vs_tokens(
            trained, out_dir, protocol.select, report.references
        ),
        **{
            f"{protocol.select} vs {k}": report_plots.tuning(trained, out_dir, k, protocol.select)
            for k in protocol.tune
        },
        "length extrapolation": report_plots.extrapolation(report.rows, out_dir),
        f"{protocol.metric} by test size": report_plots.by_length(
            report.rows, out_dir, protocol.metric
        ),
        "per-layer gradient norms": report_plots.grad_norms(trained, out_dir),
        **{
            f"{key} vs {factor}": report_plots.against_factor(
                report.rows,
                out_dir,
                key,
                factor,
                [f for f in report.varying if f != factor],
                [r.primary if key == protocol.metric else r.secondary[key] for r in report.rows],
            )
            for factor in report_plots.numeric_factors(report.rows, report.varying)
            for key in [protocol.metric, *report.secondary]
        },
        **probe_curves(trained, out_dir),  # probe/* over training (docs/probes.md)
    }
    text = render_markdown(
        report,
        title=title or f"Sweep report: {', '.join(Path(r).name for r in roots)}",
        roots=[str(r) for r in roots],
        runs=runs,
        plots=plots,
        left_out=left_out,
    )
    md = out_dir / "report.md"
    atomic_write(md, text + "\n", root=out_dir)
    return ReportFiles(report, runs, md, write_all(report, out_dir), plots)
