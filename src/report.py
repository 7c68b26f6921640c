"""Turn a sweep into a comparison a reviewer can check: ``python -m src.report <sweep dir> [<dir> ...]``.

    python -m src.report <sweep dir>... [--tune optim.lr [--tune <key> ...]] [--baseline key=value[,...]]

Reads every run directory below the given directories (``.hydra/config.yaml`` and
``overrides.yaml``, ``metrics.json``, ``csv/*/metrics.csv``, ``budget.json``, ``ngram.json``,
``grad_norms.json``, ``extrapolation.json``, ``match_params.json``, evaluations inside the run).
A variant is every override except the seed, the tuned keys and ``protocol.*``. The protocol
(docs/studies.md) comes from the runs' saved ``protocol:`` node; the flags override it.

For each variant: the chosen value of each tuned key (lowest mean ``val/loss`` over seeds, on
the selection runs) with a flag when it sits at the edge of the grid; on the verdict runs, the
verdict metric (``test/loss``) and each secondary metric as n, mean, std and 95 % t-interval; Δ
against the baseline with its 95 % interval, Welch's p, the Holm-adjusted p over every
comparison the report makes, a verdict (better | worse | equivalent | inconclusive; equivalent
only by TOST against ``report.equivalence_margin``) and the minimum detectable effect at 80 %
power; parameters, FLOPs per token and training FLOPs; smoothed n-gram reference rows. Writes
to ``--out`` (default: the first directory) ``report.md``, ``report.csv``, ``runs.csv``,
``comparisons.csv``, ``tuning.csv``, ``references.csv`` and the plots.

Examples::

    python -m src.report ~/studies/ffn_norm                       # the protocol the runs declare
    python -m src.report outputs/multirun/x --tune optim.lr --baseline model/ffn=gelu
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence

from src.reporting.build import ReportFiles, make_report
from src.studies.protocol import DESIGNS, ProtocolError
from src.studies.runs import IGNORED_KEYS
from src.reporting.table import DEFAULT_SECONDARY


def main(argv: Sequence[str] | None = None) -> ReportFiles:
    p = argparse.ArgumentParser(prog="python -m src.report", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="+", help="sweep directories (hydra.sweep.dir) or run directories")
    p.add_argument("--out", default=None, help="where to write report.md, the CSV files and the plots (default: the first dir)")
    p.add_argument("--tune", action="append", default=[], metavar="KEY",
                   help="a hyper-parameter tuned per variant (repeat for several; default: the runs' protocol.tune)")
    p.add_argument("--baseline", default=None, help="key=value[,key=value] picking the baseline variant (default: the "
                                                    "protocol's, else the first)")
    p.add_argument("--metric", default=None, help="verdict metric (default: the protocol's, else test/loss)")
    p.add_argument("--select", default=None, help="selection metric, validation split (default val/loss)")
    p.add_argument("--design", default=None, choices=DESIGNS, help="two_stage | grid (default: the protocol's, else "
                                                                    "inferred from the runs' protocol.stage labels)")
    p.add_argument("--equivalence-margin", type=float, default=None,
                   help="TOST margin in the verdict metric's units (default: the runs' report.equivalence_margin)")
    p.add_argument("--comparisons", default=None, choices=("baseline", "one_factor"),
                   help="baseline: each variant vs the baseline; one_factor: also every pair differing in one factor")
    p.add_argument("--alpha", type=float, default=0.05, help="family-wise significance level (default 0.05)")
    p.add_argument("--extra", nargs="*", default=None,
                   help="secondary metrics (metrics.json keys or fnmatch patterns; default: the protocol's, else "
                        + " ".join(DEFAULT_SECONDARY) + ")")
    p.add_argument("--ignore", nargs="*", default=[],
                   help="more override keys (a trailing '.' = prefix) that do not define a variant, besides "
                        + ", ".join(IGNORED_KEYS))
    p.add_argument("--title", default=None)
    args = p.parse_args(argv)
    try:
        files = make_report(args.dirs, args.out, tune=args.tune, baseline=args.baseline, metric=args.metric,
                            select=args.select, design=args.design, equivalence_margin=args.equivalence_margin,
                            comparisons=args.comparisons, alpha=args.alpha, extra=args.extra,
                            ignore=[*IGNORED_KEYS, *args.ignore],
                            title=args.title)
    except (ProtocolError, ValueError, FileNotFoundError) as e:
        p.exit(2, f"python -m src.report: {e}\n")
    print(files.markdown.read_text())
    print(f"wrote {files.markdown}, " + ", ".join(str(f) for f in files.files.values())
          + "".join(f", {p}" for p in files.plots.values() if p is not None))
    return files


if __name__ == "__main__":
    main()
