"""Run a study's protocol stage by stage: ``python -m src.study experiment=study_<name> [overrides]
[--stage ...]``.

The study config declares the protocol (``protocol:``, docs/studies.md) and its variants (the
keys of ``hydra.sweeper.params`` other than the seed, the tuned keys and ``protocol.*``, plus any
sweep given here, e.g. ``model/ffn=gelu,swiglu``). Each stage is ``python -m src.train -m`` with
the overrides it needs, into the study's ``hydra.sweep.dir``, resumable (a re-run skips the jobs
that completed):

* ``tune`` — every candidate of the tuned keys on ``protocol.tune_seeds`` (``two_stage``), or on
  every seed (``grid``), ``protocol.stage=tune|grid``; then its grid extensions: a variant whose
  chosen value is the smallest or largest candidate runs one more candidate one grid step past it
  on the same seeds, and selects again, up to ``protocol.max_grid_extensions`` times per key;
* ``confirm`` (``two_stage``) — per variant, the candidate with the lowest mean ``val/loss`` of
  the tune stage (``src.studies.tuning``) on ``protocol.seeds``, ``protocol.stage=confirm``;
  refused while a chosen value is still at an edge, unless ``protocol.allow_edge=true`` (under
  ``grid``, where the verdict runs have run already, the report stage warns instead);
* ``report`` — ``python -m src.report <sweep dir> --out <--out>``;
* ``all`` (default) — the three in order.

With ``protocol.match: flops`` (or ``tokens``) each variant is built once here to count its
training FLOPs per step (``src.models.matching``), and gets the ``trainer.max_steps`` at which
its training FLOPs (tokens) equal the baseline variant's at the configured ``trainer.max_steps``;
that override is part of every one of its jobs. Every command is printed and appended to
``<sweep dir>/study_commands.sh``; ``--dry-run`` prints the commands without running them.

Examples::

    python -m src.study experiment=study_ffn_norm hydra.sweep.dir=$HOME/studies/ffn_norm \\
        hydra/launcher=joblib hydra.launcher.n_jobs=2 --out experiments/04_ffn_norm
    python -m src.study experiment=study_ffn_norm --stage confirm --dry-run
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from src.config.typos import check_command_line
from src.config.yaml_limits import check_command_line_yaml
from src.errors import ConfigError
from src.jsonfile import write_json
from src.reporting.build import find_baseline, make_report
from src.reporting.planning import SEEDS_PLAN, PowerPlan, pilot_plan, power_plan
from src.studies import stages
from src.studies.runs import IGNORED_KEYS, load_runs
from src.studies.stages import (
    Plan,
    baseline_index,
    compose,
    edge_refusal,
    extension_commands,
    run_commands,
    sweep_plan,
    tune_commands,
    variant_overrides,
)
from src.studies.tuning import tune_variants

log = logging.getLogger("src.study")
STAGES = ("tune", "confirm", "report", "all")


def plan(overrides: Sequence[str], work_dir: Path | None = None) -> Plan:
    """The protocol, the sweep directory, the variants and (for flops/tokens matching) their
    steps."""
    p = sweep_plan(overrides)
    if p.protocol.match in ("flops", "tokens"):
        p.steps = solved_steps(p, work_dir)
    return p


def solved_steps(p: Plan, work_dir: Path | None = None) -> list[int | None]:
    """``trainer.max_steps`` per variant so its training FLOPs (tokens) equal the baseline's."""
    from src.training.budget import run_budget, solve_steps
    from src.training.setup import build_run

    budgets = []
    for v in p.variants:
        with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
            cfg = compose(
                [
                    *p.fixed,
                    *variant_overrides(v),
                    f"paths.output_dir={tmp}",
                    f"paths.root_dir={Path.cwd()}",
                ]
            )
            from omegaconf import open_dict

            with open_dict(cfg):
                del cfg["hydra"]
            budgets.append(run_budget(build_run(cfg)))
    ref = budgets[baseline_index(p)]
    steps = [solve_steps(ref, b, p.protocol.match) for b in budgets]
    for v, b, s in zip(p.variants, budgets, steps):
        log.info(
            "%s: %.4g training FLOPs per step, %d tokens per step -> trainer.max_steps=%d (%s "
            "matching)",
            variant_overrides(v) or "(defaults)",
            b.flops_per_step,
            b.tokens_per_step,
            s,
            p.protocol.match,
        )
    return steps


def confirm_stage(p: Plan) -> tuple[list[list[str]], dict | None]:
    """The confirm stage's commands and, under ``protocol.seeds: auto``, the seeds plan they follow
    (``auto_seeds``). The plan is the caller's to write, and only by a confirm stage that runs: a dry
    run leaves ``seeds_plan.json`` as it was, so the report never quotes seeds nothing ran on."""
    records: list[dict] = []

    def seeds(plan_: Plan) -> list[str]:
        if not records:
            records.append(auto_seeds(plan_))
        return records[0]["seeds"]

    commands = stages.confirm_commands(p, seeds)
    return commands, (records[0] if records else None)


def confirm_commands(p: Plan) -> list[list[str]]:
    """The confirm stage's commands (``confirm_stage``), writing nothing."""
    return confirm_stage(p)[0]


def auto_seeds(p: Plan) -> dict:
    """``protocol.seeds: auto``: the most seeds any comparison needs for ``protocol.target_mde``
    (the paired plan: the confirm runs of every variant share their seeds and batches; the unpaired
    one where no pairs were measured), at most ``protocol.max_seeds``, numbered from 1 past the tune
    seeds. -> the record ``seeds_plan.json`` keeps and the report quotes: the seeds, each
    comparison's need and, where it has none, why (no spread, or more than 1,000 seeds)."""
    plan_ = power_plan_of(p)
    needs = [r.needed() for r in plan_.rows]
    cap = int(p.protocol.max_seeds or 2)
    n = min(cap, max((k for k, _ in needs if k is not None), default=cap))
    capped = any(k is None or k > cap for k, _ in needs)
    tune = set(p.protocol.tune_seeds)
    seeds, s = [], 1
    while len(seeds) < max(2, n):
        if str(s) not in tune:
            seeds.append(str(s))
        s += 1
    log.info(
        "protocol.seeds=auto: %d seeds per variant (%s)%s",
        len(seeds),
        ", ".join(str(k) if k is not None else why for k, why in needs),
        f", capped by protocol.max_seeds={cap}" if capped else "",
    )
    return {
        "seeds": seeds,
        "needed": [k for k, _ in needs],
        "why": [why for _, why in needs],
        "max_seeds": cap,
        "capped": capped,
        "target_mde": p.protocol.target_mde,
        "variants": [r.variant for r in plan_.rows],
    }


def extend_grid(p: Plan, dry_run: bool) -> None:
    """Extension rounds until no variant's chosen value is at an edge it may still extend (at most
    ``protocol.max_grid_extensions`` per tuned key and variant). A dry run prints the next round,
    when the selection stage's runs are there to choose from."""
    if dry_run:
        try:
            commands = extension_commands(p) if p.sweep_dir.is_dir() else None
        except (ConfigError, FileNotFoundError):  # the selection stage has not run (or finished)
            commands = None
        if commands is None and p.protocol.max_grid_extensions:
            print(
                "# grid extensions: once the selection stage has run, a chosen value at an edge "
                f"of its grid gets a candidate one step past it (at most "
                f"protocol.max_grid_extensions={p.protocol.max_grid_extensions} per key)"
            )
        elif not commands and p.protocol.max_grid_extensions:
            print("# grid extensions: none to make (no chosen value at an edge it may extend)")
        run_commands(commands or [], p.sweep_dir, dry_run=True)
        return
    # each round adds a candidate or finishes one; the bound only guards against a job that
    # never finishes yet fails without an error
    rounds = (p.protocol.max_grid_extensions + 1) * max(1, len(p.protocol.tune)) + 1
    for _ in range(rounds):
        commands = extension_commands(p)
        if not commands:
            return
        run_commands(commands, p.sweep_dir, dry_run=False)
    raise ConfigError(
        f"the grid extensions in {p.sweep_dir} did not settle in {rounds} rounds: a job at an "
        "added candidate keeps ending without metrics.json; check its log and run --stage tune again"
    )


def power_plan_of(p: Plan) -> PowerPlan:
    """``--plan``: the tune stage's runs in the sweep directory (or ``protocol.pilot_sd`` alone) ->
    seeds per variant."""
    if p.protocol.target_mde is None:
        raise ConfigError(
            "--plan needs protocol.target_mde: the smallest difference of the verdict metric to "
            "detect, e.g. protocol.target_mde=0.02"
        )
    runs = load_runs([p.sweep_dir]) if p.sweep_dir.is_dir() else []
    tuned, varying, _ = tune_variants(runs, p.protocol, IGNORED_KEYS)
    if not tuned and p.protocol.pilot_sd is None:
        raise ConfigError(
            f"no tune-stage runs in {p.sweep_dir} to measure the spread from: run --stage tune "
            "first, or set protocol.pilot_sd"
        )
    # before any run: the pilot spread, unpaired only (a pilot sd says nothing of the pairing)
    if not tuned:
        return pilot_plan(
            [" ".join(variant_overrides(v)) or "(defaults)" for v in p.variants],
            baseline_index(p),
            p.protocol.target_mde,
            p.protocol.pilot_sd,
            protocol=p.protocol,
        )
    base = find_baseline([t.variant for t in tuned], p.protocol.baseline)
    return power_plan(tuned, varying, base, p.protocol, p.protocol.target_mde, p.protocol.pilot_sd)


class _CurrentStderr(logging.StreamHandler):
    """A handler on ``sys.stderr`` as it is when a record is emitted, not as it was when the
    handler was made (a caller that swaps stderr, as pytest's capture does, keeps the messages)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(logging.Formatter("%(message)s"))

    @property  # type: ignore[override]
    def stream(self):  # noqa: ANN201
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:  # noqa: ANN001
        pass


def log_to_stderr() -> None:
    """The study's progress lines (INFO) on stderr, once per process."""
    root = logging.getLogger()
    if not any(isinstance(h, _CurrentStderr) for h in root.handlers):
        root.addHandler(_CurrentStderr())
    root.setLevel(logging.INFO)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m src.study",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "overrides",
        nargs="*",
        help="Hydra overrides of conf/train.yaml, e.g. experiment=study_norm",
    )
    ap.add_argument("--stage", default="all", choices=STAGES)
    ap.add_argument(
        "--out", default=None, help="where the report goes (default: the sweep directory)"
    )
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="print the commands of the stage(s) without running them",
    )
    ap.add_argument(
        "--plan",
        action="store_true",
        help="print the seeds per variant each comparison needs to detect "
        "protocol.target_mde (paired and unpaired) and the compute that implies, from the tune "
        "stage's runs or protocol.pilot_sd; runs nothing",
    )
    args = ap.parse_intermixed_args(argv)  # flags and overrides in any order
    # a YAML alias bomb in a named config file: one line, not a hang
    check_command_line_yaml(args.overrides)
    # a misspelt key or option: the closest names (src/config/typos.py)
    check_command_line("train", args.overrides)
    log_to_stderr()
    try:
        p = plan(args.overrides)
        if args.plan:
            print(power_plan_of(p).render())
            return
        stages = ("tune", "confirm", "report") if args.stage == "all" else (args.stage,)
        for stage in stages:
            if stage == "tune":
                run_commands(tune_commands(p), p.sweep_dir, args.dry_run)
                extend_grid(p, args.dry_run)
            elif stage == "confirm" and args.dry_run and "tune" in stages:
                print(
                    "# confirm: one multirun per variant at its chosen value, once the tune stage "
                    "has run"
                )
            elif stage == "confirm":
                # a ConfigError while the tune stage is unfinished
                commands, seeds_plan = confirm_stage(p)
                refusal = edge_refusal(p) if commands else None
                if refusal:
                    raise ConfigError(f"the confirm stage does not start: {refusal}")
                if seeds_plan is not None and not args.dry_run:
                    write_json(p.sweep_dir / SEEDS_PLAN, seeds_plan)
                run_commands(commands, p.sweep_dir, args.dry_run)
            elif stage == "report" and not args.dry_run:
                # grid design: the verdict runs have run; the report flags the edge
                if p.protocol.design == "grid":
                    try:
                        refusal = edge_refusal(p)
                    except (ConfigError, FileNotFoundError):  # the report says what is missing
                        refusal = None
                    if refusal:
                        log.warning("verdicts at an edge (the report flags them): %s", refusal)
                files = make_report([p.sweep_dir], args.out or p.sweep_dir)
                print(f"wrote {files.markdown}")
    except (ConfigError, FileNotFoundError) as e:
        ap.exit(2, f"python -m src.study: {e}\n")


if __name__ == "__main__":
    main()
