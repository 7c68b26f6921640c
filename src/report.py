"""Reports: ``python -m src.report [scaling | extrapolation | --check-claims | ...] ...``.

    python -m src.report <sweep dir>... [--tune optim.lr [--tune <key> ...]] [--baseline key=value[,...]] [--eval-variants]
    python -m src.report scaling <sweep dir>... [--size KEY] [--metric test/loss] [--out DIR] [--boot 1000] [--lnd] [--budget FLOPS] [--d-key KEY]
    python -m src.report extrapolation <run dir | .ckpt> [--factors 1 2 4] [--scaling yarn]
    python -m src.report --check-claims experiments/<study>/claims.yaml
    python -m src.report --write-claims experiments/<study>/claims.yaml

**The comparison** (the default): turn a sweep into a comparison a reviewer can check. Reads every
run directory below the given directories (``.hydra/config.yaml`` and ``overrides.yaml``,
``metrics.json``, ``csv/*/metrics.csv``, ``budget.json``, ``ngram.json``, ``grad_norms.json``,
``extrapolation.json``, ``match_params.json``, evaluations inside the run). A variant is every
override except the seed, the tuned keys and ``protocol.*``. The protocol (docs/studies.md) comes
from the runs' saved ``protocol:`` node; the flags override it.

For each variant: the chosen value of each tuned key (lowest mean ``val/loss`` over seeds, on the
selection runs) with a flag when it sits at the edge of the grid; on the verdict runs, the verdict
metric (``test/loss``) and each secondary metric as n, mean, std and 95 % t-interval; Δ against the
baseline with its 95 % interval, the p of the paired t-test by seed (where both sides ran the same
seeds on the same batches; --pairing) or Welch's, the Holm-adjusted p over every comparison the
report makes, a verdict (better | worse | equivalent | inconclusive; equivalent only by TOST against
``report.equivalence_margin``) and the minimum detectable effect at 80 % power; parameters, FLOPs
per token and training FLOPs; smoothed n-gram reference rows. Writes to ``--out`` (default: the
first directory) ``report.md``, ``report.csv``, ``runs.csv``, ``comparisons.csv``, ``tuning.csv``,
``references.csv`` and the plots. ``--eval-variants``: each RoPE scaling applied at evaluation time
(``extrapolation/yarn/ppl@4x`` …) is a variant of its own, ``eval.rope_scaling=yarn``, made of the
same runs' weights, so "RoPE + YaRN at 4x vs sinusoidal at 4x" is a tested, paired comparison
(src/studies/eval_variants.py).

**scaling**: the loss against parameters per arm of a sizes sweep, L(N) = E + A·N^-α fitted per arm
with bootstrap intervals, the ranking at each size and where the curves cross
(src/reporting/scaling.py; writes scaling.md/csv, scaling_points.csv, scaling_crossings.csv,
scaling.png). With runs at several token budgets D per size (cooldown branches of one WSD trunk
per size), also L(N, D) = E + A·N^-α + B·D^-β per arm, the compute-optimal N and D for
``--budget`` FLOPs, and whether each pair's advantage shrinks with D (scaling_lnd.md/csv);
``--lnd`` requires that fit.

**extrapolation**: the perplexity of a run's checkpoint at 1×, 2×, 4× … its training length
(src/evaluation/extrapolation.py; writes the run's extrapolation.json and metrics.json entries).

**--check-claims / --write-claims**: a study's claims ledger (src/reporting/claims.py) checked
against the reports its entries name and against the claims table of the README beside it (exit 1
listing each claim that does not hold), or that table written into the README.

A first argument named ``scaling`` or ``extrapolation`` picks that report; a sweep directory of
that name is given as ``./scaling``.

Examples::

    python -m src.report ~/studies/ffn_norm                       # the protocol the runs declare
    python -m src.report outputs/multirun/x --tune optim.lr --baseline model/ffn=gelu
    python -m src.report outputs/studies/positions/cpu --eval-variants    # RoPE + YaRN etc. as variants
    python -m src.report scaling ~/studies/scaling/full --size experiment/study_scaling/size
    python -m src.report extrapolation outputs/runs/rope --factors 1 2 4 8 --scaling yarn
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from src.cli import is_ours
from src.errors import WriteError
from src.evaluation.extrapolation import DEFAULT_FACTORS, extrapolate_run
from src.reporting.build import ReportFiles, make_report
from src.reporting.claims import ClaimsCheck, check_claims, read_ledger, write_claims
from src.reporting.comparisons import PAIRINGS
from src.reporting.scaling import make_scaling_report
from src.reporting.table import DEFAULT_SECONDARY
from src.studies.protocol import DESIGNS, TESTS
from src.studies.runs import IGNORED_KEYS


def _parser(name: str, description: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog=f"python -m src.report{' ' + name if name else ''}",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def compare(argv: Sequence[str] | None = None) -> ReportFiles:
    """The comparison report of one or more sweep directories."""
    p = _parser(
        "",
        "Turn a sweep into a comparison a reviewer can check (also: python -m src.report scaling | "
        "extrapolation | --check-claims -h).",
    )
    p.add_argument("dirs", nargs="+", help="sweep directories (hydra.sweep.dir) or run directories")
    p.add_argument(
        "--out",
        default=None,
        help="where to write report.md, the CSV files and the plots (default: the first dir)",
    )
    p.add_argument(
        "--tune",
        action="append",
        default=[],
        metavar="KEY",
        help="a hyper-parameter tuned per variant (repeat for several; default: the runs' protocol.tune)",
    )
    p.add_argument(
        "--fixed",
        action="store_true",
        help="tune nothing: the declared tuned keys define variants like any other override, and every run "
        "is a verdict run (an ablation at fixed values after a study)",
    )
    p.add_argument(
        "--baseline",
        default=None,
        help="key=value[,key=value] picking the baseline variant (default: the "
        "protocol's, else the first)",
    )
    p.add_argument(
        "--metric", default=None, help="verdict metric (default: the protocol's, else test/loss)"
    )
    p.add_argument(
        "--select", default=None, help="selection metric, validation split (default val/loss)"
    )
    p.add_argument(
        "--design",
        default=None,
        choices=DESIGNS,
        help="two_stage | grid (default: the protocol's, else "
        "inferred from the runs' protocol.stage labels)",
    )
    p.add_argument(
        "--equivalence-margin",
        type=float,
        default=None,
        help="TOST margin in the verdict metric's units (default: the runs' report.equivalence_margin)",
    )
    p.add_argument(
        "--comparisons",
        default=None,
        metavar="{baseline,one_factor,factor:<key>}",
        help="baseline: each variant vs the baseline; one_factor: also every pair differing in one factor; "
        "factor:<key>: only the pairs differing in <key> alone (an ablation: each variant under "
        "the other value of one factor)",
    )
    p.add_argument(
        "--alpha", type=float, default=0.05, help="family-wise significance level (default 0.05)"
    )
    p.add_argument(
        "--pairing",
        default="auto",
        choices=PAIRINGS,
        help="auto (default): the paired t-test by seed where both sides ran the same seeds on the same data "
        "order, else Welch's; paired: pair on the shared seeds; unpaired: Welch's everywhere",
    )
    p.add_argument(
        "--extra",
        nargs="*",
        default=None,
        help="secondary metrics (metrics.json keys or fnmatch patterns; default: the protocol's, else "
        + " ".join(DEFAULT_SECONDARY)
        + ")",
    )
    p.add_argument(
        "--eval-variants",
        action="store_true",
        help="each RoPE scaling the runs were also scored with at evaluation time (extrapolation/<name>/ppl@<f>x "
        "in metrics.json: callbacks.extrapolation.scalings) becomes a variant of its own, "
        "eval.rope_scaling=<name>: the same trained weights, compared by seed with every variant "
        "on extrapolation/ppl@<f>x and loss@<f>x (not on test/*, which are the trained variant's "
        "own)",
    )
    p.add_argument(
        "--ignore",
        nargs="*",
        default=[],
        help="more override keys (a trailing '.' = prefix) that do not define a variant, besides "
        + ", ".join(IGNORED_KEYS),
    )
    p.add_argument(
        "--stages",
        nargs="+",
        default=None,
        metavar="STAGE",
        help="only the runs of these protocol stages (e.g. tune: the tune stage's report while the confirm "
        "stage runs)",
    )
    p.add_argument(
        "--test",
        default=None,
        choices=TESTS,
        help="the test (default: the protocol's, else auto: the exact permutation test for bounded, "
        "two-valued or spreadless metrics, the t-test otherwise)",
    )
    p.add_argument(
        "--questions",
        default=None,
        metavar="FILE",
        help="a YAML file with primary: and interactions: (the protocol's keys), for runs that "
        "declared none; the report says they were declared after the runs",
    )
    p.add_argument("--title", default=None)
    args = p.parse_args(argv)
    try:
        files = make_report(
            args.dirs,
            args.out,
            tune=args.tune,
            fixed=args.fixed,
            baseline=args.baseline,
            metric=args.metric,
            select=args.select,
            design=args.design,
            equivalence_margin=args.equivalence_margin,
            comparisons=args.comparisons,
            alpha=args.alpha,
            extra=args.extra,
            pairing=args.pairing,
            ignore=[*IGNORED_KEYS, *args.ignore],
            eval_variants=args.eval_variants,
            stages=args.stages,
            title=args.title,
            test=args.test,
            questions=args.questions,
        )
    except (
        ValueError,
        FileNotFoundError,
        WriteError,
    ) as e:  # ConfigError and DataError are ValueErrors
        p.exit(2, f"python -m src.report: {e}\n")
    print(files.markdown.read_text())
    print(
        f"wrote {files.markdown}, "
        + ", ".join(str(f) for f in files.files.values())
        + "".join(f", {p}" for p in files.plots.values() if p is not None)
    )
    return files


def scaling(argv: Sequence[str] | None = None) -> dict[str, Path]:
    """The scaling report: L(N) per arm, bootstrap intervals, rankings and crossings."""
    p = _parser(
        "scaling",
        "Loss against parameters per arm: L(N) = E + A*N^-alpha fitted per arm, with bootstrap "
        "intervals over seeds, the ranking at each size and where the fitted curves cross.",
    )
    p.add_argument("dirs", nargs="+", help="sweep directories (hydra.sweep.dir) or run directories")
    p.add_argument(
        "--size",
        default=None,
        help="override key of the size factor (default: the varying key along "
        "which the parameter count changes most)",
    )
    p.add_argument(
        "--metric", default=None, help="the fitted metric (default: the protocol's, else test/loss)"
    )
    p.add_argument("--out", default=None, help="where the files go (default: the first directory)")
    p.add_argument(
        "--boot",
        type=int,
        default=1000,
        help="bootstrap replicates (default 1000; 0: no intervals)",
    )
    p.add_argument("--seed", type=int, default=0, help="the bootstrap's random seed")
    p.add_argument("--title", default=None)
    p.add_argument(
        "--lnd",
        action="store_true",
        help="require L(N, D) = E + A*N^-alpha + B*D^-beta per arm (refused when the runs cannot "
        "give it); without: fitted when some size has runs at 2 or more token budgets",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        metavar="FLOPS",
        help="compute budget C of the compute-optimal N and D, C = 6*N*D (default: the largest "
        "among the runs)",
    )
    p.add_argument(
        "--d-key",
        action="append",
        default=None,
        metavar="KEY",
        help="an override key of the token-budget axis, left out of the arms of L(N, D) (repeat "
        "for several; default: the varying keys along which tokens_seen changes 1.5x or more); "
        "implies --lnd",
    )
    args = p.parse_args(argv)
    try:
        files = make_scaling_report(
            args.dirs,
            args.out,
            args.size,
            args.metric,
            args.boot,
            args.seed,
            args.title,
            lnd=args.lnd,
            compute=args.budget,
            d_keys=args.d_key,
        )
    except (
        ValueError,
        FileNotFoundError,
        WriteError,
    ) as e:  # ConfigError and DataError are ValueErrors
        p.exit(2, f"python -m src.report scaling: {e}\n")
    print(files["scaling.md"].read_text())
    print("wrote " + ", ".join(str(f) for f in files.values()))
    return files


def extrapolation(argv: Sequence[str] | None = None) -> list[Any]:
    """Perplexity of a trained checkpoint at multiples of its training length."""
    import yaml

    p = _parser(
        "extrapolation", "Perplexity of a trained checkpoint at multiples of its training length."
    )
    p.add_argument("path", help="a run directory (uses checkpoints/last.ckpt) or a .ckpt file")
    p.add_argument(
        "--ckpt",
        choices=("last", "best"),
        default="last",
        help="which checkpoint of a run directory",
    )
    p.add_argument("--factors", type=float, nargs="+", default=list(DEFAULT_FACTORS))
    p.add_argument(
        "--stride", type=int, default=None, help="window stride (default: disjoint windows)"
    )
    p.add_argument(
        "--max-tokens", type=int, default=None, help="cap on the evaluated span (tokens)"
    )
    p.add_argument("--train-length", type=int, default=None, help="default: the run's block_size")
    p.add_argument("--split", default="val", help="split of the run's data source (default val)")
    p.add_argument(
        "--text", default=None, help="evaluate this text file instead of the run's split"
    )
    p.add_argument(
        "--scaling",
        default=None,
        help="evaluate a RoPE model with a scaling: linear | dynamic | yarn | "
        "llama3, or a model.position.scaling node such as '{name: yarn, factor: 8}' (default "
        "factor: each context over the training length)",
    )
    p.add_argument(
        "--no-write", action="store_true", help="print only; do not update the run's metrics.json"
    )
    args = p.parse_args(argv)
    try:
        results, summary = extrapolate_run(
            args.path,
            ckpt=args.ckpt,
            factors=args.factors,
            stride=args.stride,
            max_tokens=args.max_tokens,
            train_length=args.train_length,
            split=args.split,
            text=args.text,
            scaling=None if args.scaling is None else yaml.safe_load(args.scaling),
            write=not args.no_write,
        )
    # our errors (they name the fix) and a missing path: one line; anything else: traceback
    except Exception as e:
        if not (is_ours(e) or isinstance(e, FileNotFoundError)):
            raise
        p.exit(2, f"python -m src.report extrapolation: {type(e).__name__}: {e}\n")
    print(summary)
    return results


def claims(argv: Sequence[str] | None = None) -> ClaimsCheck | Path:
    """A study's claims ledger checked against its reports and README, or its table written."""
    p = _parser(
        "",
        "Check a study's claims ledger against the report rows it names and the README's claims "
        "table, or write that table into the README beside the ledger.",
    )
    given = p.add_mutually_exclusive_group(required=True)
    given.add_argument(
        "--check-claims",
        metavar="CLAIMS_YAML",
        help="exit 1 listing each claim whose verdict or direction differs from its report row "
        "(or whose row is missing), and a README table that is not the ledger's",
    )
    given.add_argument(
        "--write-claims",
        metavar="CLAIMS_YAML",
        help="write the ledger's claims table into the README.md beside it, between "
        "<!-- claims:begin --> and <!-- claims:end -->",
    )
    args = p.parse_args(argv)
    try:
        if args.write_claims is not None:
            readme = write_claims(read_ledger(args.write_claims))
            print(f"wrote the claims table of {args.write_claims} into {readme}")
            return readme
        result = check_claims(read_ledger(args.check_claims))
    except (ValueError, OSError) as e:  # ConfigError is a ValueError, WriteError an OSError
        p.exit(2, f"python -m src.report: {e}\n")
    if not result.ok:
        p.exit(1, "\n".join([*result.claims, *result.readme, result.summary]) + "\n")
    print(result.summary)
    return result


#: flags that pick the claims ledger instead of a report
CLAIM_FLAGS = ("--check-claims", "--write-claims")

SUBCOMMANDS: dict[str, Callable[[Sequence[str]], Any]] = {
    "scaling": scaling,
    "extrapolation": extrapolation,
}


def main(argv: Sequence[str] | None = None) -> Any:
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in SUBCOMMANDS:
        return SUBCOMMANDS[args[0]](args[1:])
    if any(a.split("=", 1)[0] in CLAIM_FLAGS for a in args):
        return claims(args)
    return compare(args)


if __name__ == "__main__":
    main()
