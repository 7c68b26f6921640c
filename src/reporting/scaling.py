"""Does a ranking survive scale? The scaling analysis of a study sweep
(conf/experiment/study_scaling.yaml):

    python -m src.report scaling <sweep dir>... [--size KEY] [--metric test/loss] [--out DIR] [--boot 1000]

The runs are read and tuned as ``python -m src.report`` does (src.studies.tuning: each variant at
its own best learning rate on validation; its verdict runs at that value). A variant is an *arm*
(the values of every factor but the size, e.g. ``pre_learned``) at one *size* (``--size``: the
override key of the size factor; by default the varying key along which the parameter count
changes most). Per arm, on the verdict runs' metric (test split):

* ``L(N) = E + A·N^(−α)`` fitted to the mean over seeds at each size, N = the run's parameter count
  (``budget.json``, else ``metrics.json`` ``params``: every parameter, embeddings included; Kaplan
  et al. 2020 count non-embedding ones), with 95 % bootstrap intervals over seeds
  (src.studies.power_law);
* the ranking of the arms at each size (by mean) and whether it changes across the range;
* for every pair of arms, the N where the fitted curves cross (searched from a hundredth of the
  smallest to a hundred times the largest size), whether that is inside the measured range or
  within 10× beyond the largest size, and the share of bootstrap replicate pairs whose curves cross
  in each.

Writes ``scaling.md``, ``scaling.csv`` (one row per arm), ``scaling_points.csv`` (one row per
verdict run), ``scaling_crossings.csv`` and ``scaling.png`` (loss vs parameters, log-log, the fits).

With runs at several token budgets D per size (cooldown branches), also L(N, D) per arm:
``scaling_lnd.md`` and ``scaling_lnd.csv`` (src/reporting/scaling_lnd.py; ``lnd=True`` requires it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from src.errors import ConfigError
from src.files import atomic_write
from src.reporting import scaling_lnd_report
from src.reporting.csv_files import write_csv
from src.reporting.scaling_lnd import analyse_lnd
from src.reporting.scaling_plot import plot_scaling
from src.reporting.sections import significant
from src.studies.chinchilla import BRANCH_KEY
from src.studies.outcomes import run_outcome
from src.studies.power_law import PowerLawError, ScalingFit, bootstrap_fit, crossings
from src.studies.protocol import Protocol, canonical, merge_protocols
from src.studies.run_checks import check_duplicates, check_units
from src.studies.runs import IGNORED_KEYS, RunRecord, load_runs
from src.studies.tuning import TunedVariant, tune_variants

SEARCH = 100.0  # crossings are searched over [N_min / SEARCH, N_max * SEARCH]
BEYOND = (
    10.0  # "would the curves cross soon after the measured range?": within (N_max, BEYOND * N_max]
)


@dataclass
class ScalingPoint:
    arm: str
    size: str
    params: float
    seed: str
    loss: float
    chosen: str  # the chosen tuned values, "optim.lr=0.003"
    run_dir: str


@dataclass
class Crossing:
    arms: tuple[str, str]
    at: list[float]  # N where the fitted curves cross, within the searched range
    inside: bool  # one of them lies within the measured sizes
    boot_share: float | None  # share of replicate pairs crossing inside the measured range
    beyond: bool = False  # one of them lies in (N_max, BEYOND * N_max]
    boot_share_beyond: float | None = None  # share of replicate pairs crossing there


@dataclass
class ScalingAnalysis:
    metric: str
    size_key: str
    arms: list[str]  # baseline arm first
    points: list[ScalingPoint]
    fits: dict[str, ScalingFit]
    ranking: list[tuple[str, list[str]]]  # (size, arms best first) in ascending N
    crossings: list[Crossing]
    notes: list[str]
    #: arm -> {arm key: value} (the values the arm's label joins)
    arm_values: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def ranking_changes(self) -> bool:
        return len({tuple(order) for _, order in self.ranking}) > 1


def _params(run: RunRecord) -> float | None:
    n = (run.budget or {}).get("params") or run.metric("params")
    return float(n) if n else None


def size_factor(tuned: Sequence[TunedVariant], varying: Sequence[str]) -> str:
    """The varying key along which the parameter count changes most (the size factor)."""
    best, ratio = None, 1.0
    for key in varying:
        others = [k for k in varying if k != key]
        groups: dict[tuple[str, ...], list[float]] = {}
        for t in tuned:
            vals = t.variant.values()
            n = [p for r in t.variant.runs if (p := _params(r))]
            if n:
                groups.setdefault(tuple(vals.get(k, "") for k in others), []).append(
                    sum(n) / len(n)
                )
        r = max((max(g) / min(g) for g in groups.values() if len(g) > 1), default=1.0)
        if r > ratio:
            best, ratio = key, r
    if best is None or ratio < 2:
        raise ValueError(
            f"no varying key changes the parameter count by 2x or more (keys: {list(varying)}); "
            f"name the size factor with --size"
        )
    return best


def analyse(
    runs: Sequence[RunRecord],
    protocol: Protocol,
    size_key: str | None = None,
    metric: str | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> ScalingAnalysis:
    metric = metric or protocol.metric
    # a branch's trunk checkpoint differs per seed and budget: like the seed, not a variant
    tuned, varying, _ = tune_variants(runs, protocol, [*IGNORED_KEYS, BRANCH_KEY])
    size_key = size_key or size_factor(tuned, varying)
    if size_key not in varying:
        raise ValueError(
            f"--size {size_key!r} is not a key that varies between the runs' variants: "
            f"{list(varying)}"
        )
    arm_keys = [k for k in varying if k != size_key]
    points, notes = [], []
    arm_values: dict[str, dict[str, str]] = {}
    for t in tuned:
        vals = t.variant.values()
        arm = ", ".join(canonical(vals.get(k, "")) for k in arm_keys) or "(all)"
        arm_values[arm] = {k: canonical(vals.get(k, "")) for k in arm_keys}
        chosen = ", ".join(f"{k}={v}" for k, v in (t.chosen or {}).items())
        kept = [
            (r, r.metric(metric), _params(r))
            for r in t.verdict_runs
            if run_outcome(r) in ("ok", "no validation")
        ]
        for r, loss, n in kept:
            if loss is not None and math.isfinite(loss) and n:
                points.append(
                    ScalingPoint(
                        arm,
                        canonical(vals.get(size_key, "")),
                        n,
                        canonical(r.seed),
                        loss,
                        chosen,
                        str(r.path),
                    )
                )
        if len(kept) < len(t.verdict_runs) or not t.verdict_runs:
            notes.append(
                f"{t.variant.label(varying)}: {len(kept)} of {len(t.verdict_runs)} verdict run(s) "
                "usable" + ("; " + "; ".join(t.notes) if t.notes else "")
            )
    base = dict(x.split("=", 1) for x in (protocol.baseline or "").split(",") if "=" in x)
    base_arm = ", ".join(canonical(base.get(k, "")) for k in arm_keys)
    arms = sorted({p.arm for p in points}, key=lambda a: (a != base_arm, a))
    fits: dict[str, ScalingFit] = {}
    for i, arm in enumerate(arms):
        by_n: dict[float, list[float]] = {}
        for p in points:
            if p.arm == arm:
                by_n.setdefault(p.params, []).append(p.loss)
        try:
            fits[arm] = bootstrap_fit(by_n, n_boot, seed + i)
        except PowerLawError as e:
            notes.append(f"{arm}: no fit ({e})")
    sizes = sorted(
        {p.size for p in points}, key=lambda s: min(p.params for p in points if p.size == s)
    )
    ranking = []
    for s in sizes:
        means = {a: _mean([p.loss for p in points if p.size == s and p.arm == a]) for a in arms}
        ranking.append(
            (s, sorted((a for a in arms if means[a] is not None), key=lambda a: means[a]))
        )  # type: ignore[arg-type,return-value]
    lo, hi = min(p.params for p in points), max(p.params for p in points)
    pairs = [(a, b) for i, a in enumerate(arms) for b in arms[i + 1 :] if a in fits and b in fits]
    cross = []
    for a, b in pairs:
        at = crossings(fits[a].law, fits[b].law, lo / SEARCH, hi * SEARCH)
        reps = list(zip(fits[a].replicates, fits[b].replicates))
        share = (
            sum(bool(crossings(f, g, lo, hi, 200)) for f, g in reps) / len(reps) if reps else None
        )
        after = (
            sum(
                any(hi < n <= BEYOND * hi for n in crossings(f, g, hi, BEYOND * hi, 200))
                for f, g in reps
            )
            / len(reps)
            if reps
            else None
        )
        cross.append(
            Crossing(
                (a, b),
                at,
                any(lo <= n <= hi for n in at),
                share,
                any(hi < n <= BEYOND * hi for n in at),
                after,
            )
        )
    return ScalingAnalysis(metric, size_key, arms, points, fits, ranking, cross, notes, arm_values)


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _ci(ci: tuple[float, float] | None) -> str:
    return "—" if ci is None else f"[{significant(ci[0])}, {significant(ci[1])}]"


def fit_records(a: ScalingAnalysis) -> list[dict[str, object]]:
    out = []
    for arm, f in a.fits.items():
        al, e = f.interval("alpha"), f.interval("E")
        out.append(
            {
                "arm": arm,
                "n_sizes": len(f.sizes),
                "params_min": f.sizes[0],
                "params_max": f.sizes[-1],
                "E": f.law.E,
                "A": f.law.A,
                "alpha": f.law.alpha,
                "alpha_ci_low": al and al[0],
                "alpha_ci_high": al and al[1],
                "E_ci_low": e and e[0],
                "E_ci_high": e and e[1],
                "n_boot": len(f.replicates),
                "boot_failed": f.failed,
                "rmse": f.rmse,
            }
        )
    return out


def render(a: ScalingAnalysis, title: str, plot: Path | None) -> str:
    lines = [
        f"# {title}",
        "",
        f"Metric: `{a.metric}` of each arm's verdict runs at its chosen learning rate, against "
        f"parameters N (size factor `{a.size_key}`). Fit per arm on the mean over seeds at each "
        "size: L(N) = E + A·N^(−α); intervals: 95 % bootstrap over seeds.",
        "",
        "| arm | sizes | N range | E | A | α | α 95 % CI | E 95 % CI | fit RMSE |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in fit_records(a):
        lines.append(
            f"| {r['arm']} | {r['n_sizes']} | {significant(r['params_min'])}–{significant(r['params_max'])} | {significant(r['E'])} | "
            f"{significant(r['A'])} | {significant(r['alpha'])} | {_ci(a.fits[r['arm']].interval('alpha'))} | "  # type: ignore[index]
            f"{_ci(a.fits[r['arm']].interval('E'))} | {significant(r['rmse'])} |"
        )  # type: ignore[index]
    lines += [
        "",
        "## Ranking at each size (best first, by mean)",
        "",
        "| size | N | ranking |",
        "|---|---|---|",
    ]
    for s, order in a.ranking:
        n = min(p.params for p in a.points if p.size == s)
        lines.append(f"| {s} | {significant(n)} | {' < '.join(order)} |")
    lines += [
        "",
        "The ranking "
        + ("**changes** across the range." if a.ranking_changes else "is the same at every size.")
        + " (By means; whether each size's difference is a finding is the report's verdict on that pair, with Holm.)",
        "",
        "## Where the fitted curves cross",
        "",
        "Measured range: N = "
        f"{significant(min(p.params for p in a.points))}–{significant(max(p.params for p in a.points))}; "
        ""
        f'"beyond": above the largest size, up to ×{BEYOND:g} it (an extrapolation of the fits).',
        "",
        "| arms | crossing N | inside the measured range | bootstrap pairs crossing inside | "
        f"within ×{BEYOND:g} beyond the largest | bootstrap pairs crossing there |",
        "|---|---|---|---|---|---|",
    ]
    for c in a.crossings:
        share = "—" if c.boot_share is None else f"{100 * c.boot_share:.0f} %"
        after = "—" if c.boot_share_beyond is None else f"{100 * c.boot_share_beyond:.0f} %"
        lines.append(
            f"| {c.arms[0]} vs {c.arms[1]} | "
            f"{', '.join(significant(n) for n in c.at) or f'none within ×{SEARCH:g} of the range'} "
            f"| {'yes' if c.inside else 'no'} | {share} | {'yes' if c.beyond else 'no'} | {after} |"
        )
    if plot:
        lines += ["", f"![loss vs parameters]({plot.name})"]
    if a.notes:
        lines += ["", "## Notes", "", *[f"* {n}" for n in a.notes]]
    return "\n".join(lines) + "\n"


def make_scaling_report(
    roots: Sequence[str | Path],
    out: str | Path | None = None,
    size_key: str | None = None,
    metric: str | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    title: str | None = None,
    lnd: bool = False,
    compute: float | None = None,
    d_keys: Sequence[str] | None = None,
) -> dict[str, Path]:
    """Analyse the runs under ``roots`` and write the files (module docstring) to ``out`` (default
    roots[0]). ``lnd``: L(N, D) must be fitted (else a refusal); ``compute``: its budget in FLOPs
    (default: the largest 6·N·D of the runs); ``d_keys``: the keys of the D axis (default: found;
    given, they imply ``lnd``)."""
    runs = load_runs(roots)
    protocol = (
        merge_protocols([p for r in runs if (p := Protocol.from_config(r.config)) is not None])
        or Protocol()
    )
    # one sample counted twice; losses in two tokenizers' units
    check_duplicates(runs)
    check_units(runs, [metric or protocol.metric])
    a = analyse(runs, protocol, size_key, metric, n_boot, seed)
    if not a.points:
        raise ValueError(
            f"no verdict run with a finite {metric or protocol.metric} under "
            f"{', '.join(map(str, roots))}"
        )
    lnd = lnd or d_keys is not None  # naming the D axis asks for the fit
    try:
        lnd_fit = analyse_lnd(
            a.points,
            runs,
            a.arm_values,
            a.arms,
            required=lnd,
            compute=compute,
            d_keys=d_keys,
            n_boot=n_boot,
            seed=seed,
        )
    except ConfigError as e:
        if lnd:
            raise
        lnd_fit = None
        a.notes.append(f"L(N, D) not fitted: {e}")
    if lnd_fit is not None and not lnd_fit.fits:
        a.notes += [f"L(N, D) {n}" for n in lnd_fit.notes]
        lnd_fit = None
    out_dir = Path(out or roots[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    if lnd_fit is not None:
        files_lnd = scaling_lnd_report.write(
            lnd_fit, out_dir, a.metric, "Scaling: loss against parameters and tokens per arm"
        )
    plot = plot_scaling(a.points, a.fits, a.crossings, out_dir / "scaling.png", a.metric)
    files = {
        "scaling.csv": write_csv(out_dir / "scaling.csv", fit_records(a), root=out_dir),
        "scaling_points.csv": write_csv(
            out_dir / "scaling_points.csv", [vars(p) for p in a.points], root=out_dir
        ),
        "scaling_crossings.csv": write_csv(
            out_dir / "scaling_crossings.csv",
            [
                {
                    "arm_a": c.arms[0],
                    "arm_b": c.arms[1],
                    "crossing_params": ";".join(f"{n:.6g}" for n in c.at),
                    "inside_range": c.inside,
                    "boot_share_inside": c.boot_share,
                    "beyond_10x": c.beyond,
                    "boot_share_beyond_10x": c.boot_share_beyond,
                }
                for c in a.crossings
            ],
            root=out_dir,
        ),
    }
    md = out_dir / "scaling.md"
    atomic_write(
        md, render(a, title or "Scaling: loss against parameters per arm", plot), root=out_dir
    )
    return {
        "scaling.md": md,
        **files,
        **({"scaling.png": plot} if plot else {}),
        **(files_lnd if lnd_fit is not None else {}),
    }
