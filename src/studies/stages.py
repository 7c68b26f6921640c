"""A study's plan (protocol, sweep directory, variants) and the commands of its stages, run by
``python -m src.study``: the selection stage, its grid extensions (a chosen value at an edge of its
grid gets a candidate one step past it, ``src.studies.tuning.extended_value``) and the confirm
stage, which refuses to start while a chosen value is still at an edge (``edge_refusal``)."""

from __future__ import annotations

import itertools
import logging
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from src.errors import ConfigError
from src.studies.outcomes import run_outcome
from src.studies.protocol import Protocol, canonical
from src.studies.runs import IGNORED_KEYS, is_ignored, load_runs, parse_override
from src.studies.tuning import Candidate, TunedVariant, extended_value, tune_variants

log = logging.getLogger("src.study")
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


@dataclass
class Plan:
    protocol: Protocol
    sweep_dir: Path
    fixed: list[str]  # the overrides every job gets (no sweeps)
    # factor override text -> value, one dict per variant (override keys as typed)
    variants: list[dict[str, str]]
    # solved trainer.max_steps per variant (flops / tokens matching), else None
    steps: list[int | None]


def compose(overrides: Sequence[str]) -> Any:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import src.runs  # noqa: F401  (the ${sweep_subdir:} resolver of the study configs)

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=list(overrides), return_hydra_config=True)


def _split_sweeps(overrides: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
    """(plain overrides, {key as typed: values} of the sweep overrides) via Hydra's own parser."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(overrides))
    plain, sweeps = [], {}
    for text, o in zip(overrides, parsed):
        if o.is_sweep_override():
            sweeps[text.split("=", 1)[0]] = list(o.sweep_string_iterator())
        else:
            plain.append(text)
    return plain, sweeps


def sweep_plan(overrides: Sequence[str]) -> Plan:
    """The protocol, the sweep directory and the variants; the steps are left unsolved (None),
    for ``src.study.plan`` to solve under flops/tokens matching."""
    fixed, cli_sweeps = _split_sweeps(overrides)
    cfg = compose(fixed)
    from omegaconf import OmegaConf

    protocol = Protocol.from_config(OmegaConf.to_container(cfg, resolve=False))  # type: ignore[arg-type]
    if protocol is None:
        raise ConfigError(
            "the config declares no protocol: give experiment=study_<name> (conf/experiment), or "
            "add a protocol: node (docs/studies.md)"
        )
    params = dict(cfg.hydra.sweeper.params or {})
    _, config_sweeps = _split_sweeps([f"{k}={v}" for k, v in params.items()])
    # the command line wins over hydra.sweeper.params for a key both give, as a sweep or as one
    # plain value (``+experiment/<study>/task=addition`` runs that task alone), however the key is
    # spelled (``+`` or not); the config's order of the keys stays (it orders the multirun)
    cli_keys = {parse_override(k)[0]: k for k in cli_sweeps}
    sweeps: dict[str, list[str]] = {}
    for key, values in config_sweeps.items():
        name = parse_override(key)[0]
        on_cli = [o for o in fixed if parse_override(o.split("=", 1)[0])[0] == name]
        if name in cli_keys:
            sweeps[cli_keys[name]] = cli_sweeps[cli_keys[name]]
        elif on_cli:
            typed, value = on_cli[-1].split("=", 1)
            sweeps[typed] = [value]
            fixed = [o for o in fixed if o not in on_cli]
        else:
            sweeps[key] = values
    sweeps.update({k: v for k, v in cli_sweeps.items() if k not in sweeps})
    # a factor given one plain value (``optim: adamw`` in hydra.sweeper.params, or ``optim=muon`` on
    # the command line) is a one-value sweep: a variant of the study that another invocation of the
    # same sweep contrasts
    swept_keys = {parse_override(k)[0] for k in sweeps}
    for factor in [f for f in protocol.factors if f not in swept_keys]:
        on_cli = [o for o in fixed if parse_override(o.split("=", 1)[0])[0] == factor]
        in_params = [k for k in params if parse_override(str(k))[0] == factor]
        if on_cli:
            key, value = on_cli[-1].split("=", 1)
            sweeps[key] = [value]
            fixed = [o for o in fixed if o not in on_cli]
        elif in_params:
            sweeps[str(in_params[0])] = [str(params[in_params[0]])]
    tuned = set(protocol.tune)
    factors = {
        k: v
        for k, v in sweeps.items()
        if parse_override(k)[0] not in tuned and not is_ignored(parse_override(k)[0])
    }
    if set(protocol.factors) - {parse_override(k)[0] for k in factors}:
        missing = sorted(set(protocol.factors) - {parse_override(k)[0] for k in factors})
        raise ConfigError(
            f"protocol.factors names {missing}, which hydra.sweeper.params does not sweep"
        )
    variants = [dict(zip(factors, combo)) for combo in itertools.product(*factors.values())] or [{}]
    p = Plan(
        protocol,
        Path(str(cfg.hydra.sweep.dir)).expanduser(),
        fixed,
        variants,
        [None] * len(variants),
    )
    return p


def variant_overrides(variant: dict[str, str]) -> list[str]:
    return [f"{k}={v}" for k, v in variant.items()]


def baseline_index(p: Plan) -> int:
    """The variant the protocol's baseline names (first when none)."""
    if not p.protocol.baseline:
        return 0
    wanted = {
        k.lstrip("+"): canonical(v)
        for k, v in (x.split("=", 1) for x in p.protocol.baseline.split(","))
    }
    for i, v in enumerate(p.variants):
        values = {parse_override(k)[0]: canonical(x) for k, x in v.items()}
        if all(values.get(k) == x for k, x in wanted.items() if k in values):
            return i
    raise ConfigError(
        f"protocol.baseline={p.protocol.baseline!r} matches none of the variants {p.variants}"
    )


def _seeds(seeds: Sequence[str], key: str) -> str:
    if not seeds:
        raise ConfigError(f"protocol.{key} is empty: list the seeds, e.g. [1, 2, 3, 4, 5]")
    return ",".join(seeds)


def _train(overrides: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "src.train", "-m", *overrides]


def tune_commands(p: Plan) -> list[list[str]]:
    stage = "tune" if p.protocol.design == "two_stage" else "grid"
    seeds = _seeds(
        p.protocol.tune_seeds if stage == "tune" else p.protocol.seeds,
        "tune_seeds" if stage == "tune" else "seeds",
    )
    tune = [f"{k}={','.join(v)}" for k, v in p.protocol.tune.items()]
    tail = [*tune, f"seed={seeds}", f"protocol.stage={stage}"]
    if all(s is None for s in p.steps):  # one multirun over every variant
        factors = [
            f"{k}={','.join(dict.fromkeys(v[k] for v in p.variants))}"
            for k in (p.variants[0] if p.variants else {})
        ]
        return [_train([*p.fixed, *factors, *tail])]
    return [
        _train([*p.fixed, *variant_overrides(v), f"trainer.max_steps={s}", *tail])
        for v, s in zip(p.variants, p.steps)
    ]


def _selection(p: Plan) -> tuple[str, list[str]]:
    """The selection stage's label and seeds: ``tune`` on the tune seeds, or ``grid`` on all."""
    if p.protocol.design == "two_stage":
        return "tune", p.protocol.tune_seeds
    return "grid", p.protocol.seeds


def _label(v: dict[str, str]) -> str:
    return " ".join(variant_overrides(v)) or "(defaults)"


def _tuned(p: Plan) -> list[TunedVariant]:
    tuned, _, _ = tune_variants(load_runs([p.sweep_dir]), p.protocol, IGNORED_KEYS)
    return tuned


def _tuned_of(
    p: Plan, tuned: Sequence[TunedVariant], v: dict[str, str], steps: int | None
) -> TunedVariant:
    """The tuned variant of the plan's variant ``v`` (a ConfigError when none of its runs is
    found)."""
    want = {parse_override(k)[0]: canonical(x) for k, x in v.items()}
    # flops / tokens matching: the tune runs at this variant's solved steps
    if steps is not None:
        want["trainer.max_steps"] = canonical(steps)
    match = [
        t
        for t in tuned
        if all(canonical(t.variant.values().get(k, "")) == x for k, x in want.items())
        and any(c.runs for c in t.candidates)
    ]
    if not match:
        raise ConfigError(
            f"no tune-stage runs for {variant_overrides(v) or '(defaults)'} in {p.sweep_dir}: "
            "run --stage tune"
        )
    return match[0]


def _is_added(p: Plan, c: Candidate) -> bool:
    """A candidate past the declared grid (a grid extension)."""
    return any(
        x not in {canonical(y) for y in p.protocol.tune.get(k) or []} for k, x in c.values.items()
    )


def _check_finished(p: Plan, v: dict[str, str], t: TunedVariant) -> None:
    """Every declared and added candidate of the variant ran on every selection seed."""
    _, seeds = _selection(p)
    incomplete = [r.path.name for c in t.candidates for r in c.runs if r.status == "incomplete"]
    ran = {
        (tuple(c.values[k] for k in p.protocol.tune), canonical(r.seed))
        for c in t.candidates
        for r in c.runs
    }
    planned = set(itertools.product(itertools.product(*p.protocol.tune.values()), seeds))
    planned |= {
        (tuple(c.values[k] for k in p.protocol.tune), s)
        for c in t.candidates
        if _is_added(p, c)
        for s in seeds
    }
    if incomplete or planned - ran:
        missing = sorted(planned - ran)
        raise ConfigError(
            f"the tune stage of {variant_overrides(v) or '(defaults)'} is not finished: "
            f"{len(incomplete)} run(s) without metrics.json, {len(missing)} not run "
            f"{'(' + str(missing[0]) + ' …)' if missing else ''}; run --stage tune again first"
        )


def confirm_commands(p: Plan, auto_seeds: Callable[[Plan], list[str]]) -> list[list[str]]:
    """Per variant: its chosen candidate (from the tune stage's runs) on the confirm seeds
    (``auto_seeds(p)`` under ``protocol.seeds: auto``)."""
    if p.protocol.design != "two_stage":
        return []
    tuned = _tuned(p)
    out = []
    for v, steps in zip(p.variants, p.steps):
        t = _tuned_of(p, tuned, v, steps)
        _check_finished(p, v, t)
        if t.chosen is None:
            log.warning(
                "%s: no candidate could be chosen (%s); skipping its confirm stage",
                variant_overrides(v),
                t.notes,
            )
            continue
        chosen = [f"{k}={x}" for k, x in t.chosen.items()]
        max_steps = [f"trainer.max_steps={steps}"] if steps is not None else []
        seeds = auto_seeds(p) if p.protocol.auto_seeds else p.protocol.seeds
        out.append(
            _train(
                [
                    *p.fixed,
                    *variant_overrides(v),
                    *max_steps,
                    *chosen,
                    f"seed={_seeds(seeds, 'seeds')}",
                    "protocol.stage=confirm",
                ]
            )
        )
    return out


def extension_commands(p: Plan) -> list[list[str]]:
    """One round of grid extension: per variant whose chosen value sits at an edge of its grid with
    extensions left, the candidate one step past it (the chosen values, that key moved) on the
    selection seeds, labelled with the selection stage and carrying every tuned value as an
    override, so the report finds it among the variant's candidates. An added candidate with a
    seed unfinished is run again first (the sweep resumes)."""
    if not p.protocol.tune or not p.protocol.max_grid_extensions:
        return []
    stage, seeds = _selection(p)
    tuned = _tuned(p)
    out = []
    for v, steps in zip(p.variants, p.steps):
        t = _tuned_of(p, tuned, v, steps)
        redo = [
            c
            for c in t.candidates
            if _is_added(p, c)
            and not set(seeds) <= {canonical(r.seed) for r in c.runs if r.status != "incomplete"}
        ]
        if redo:
            values = redo[0].values
        else:
            _check_finished(p, v, t)
            step = t.next_extension(p.protocol)
            if step is None or t.chosen is None:
                continue
            key, value = step
            log.info(
                "%s: %s=%s is at the edge of [%s]; adding %s (extension %d of at most %d)",
                _label(v),
                key,
                t.chosen[key],
                ", ".join(t.grid(key, p.protocol)),
                value,
                len(t.added(key)) + 1,
                p.protocol.max_grid_extensions,
            )
            values = {**t.chosen, key: value}
        max_steps = [f"trainer.max_steps={steps}"] if steps is not None else []
        out.append(
            _train(
                [
                    *p.fixed,
                    *variant_overrides(v),
                    *max_steps,
                    *(f"{k}={x}" for k, x in values.items()),
                    f"seed={_seeds(seeds, 'seeds')}",
                    f"protocol.stage={stage}",
                ]
            )
        )
    return out


def edge_refusal(p: Plan) -> str | None:
    """One line naming a variant whose chosen value is still at an edge of its grid, the key, the
    value and the fix; None when none is, or under ``protocol.allow_edge``."""
    if p.protocol.allow_edge or not p.protocol.tune:
        return None
    tuned = _tuned(p)
    at_edge = [
        (v, t)
        for v, steps in zip(p.variants, p.steps)
        for t in [_tuned_of(p, tuned, v, steps)]
        if t.chosen is not None and t.edge
    ]
    if not at_edge:
        return None
    v, t = at_edge[0]
    key = t.edge[0]
    value, grid = (t.chosen or {})[key], t.grid(key, p.protocol)
    if t.next_extension(p.protocol) is not None:
        fix = "run --stage tune again (it extends the grid), or set protocol.allow_edge=true"
    elif extended_value(grid, value) is None:
        fix = f"add candidates past it to protocol.tune.{key}, or set protocol.allow_edge=true"
    else:
        fix = (
            f"raise protocol.max_grid_extensions (now {p.protocol.max_grid_extensions}) and run "
            "--stage tune again, or set protocol.allow_edge=true"
        )
    more = f" ({len(at_edge) - 1} more variant(s) at an edge)" if len(at_edge) > 1 else ""
    return (
        f"{_label(v)}: the chosen {key}={value} is at the edge of its grid [{', '.join(grid)}] "
        f"after {len(t.added(key))} extension(s){more}; {fix}"
    )


def unfinished_jobs(sweep_dir: Path) -> list[str]:
    """The sweep's jobs that failed for a reason other than divergence, or never wrote
    ``metrics.json`` (a job that died before training, e.g. refused a job slot): ``<name>: <why>``.
    A diverged job is a result the report counts, never listed here."""
    out = []
    for run in load_runs([sweep_dir]) if sweep_dir.is_dir() else []:
        outcome = run_outcome(run)
        if outcome in ("failed", "incomplete"):
            why = str(
                (run.metrics or {}).get("error")
                or "no metrics.json: it stopped before it could write one"
            )
            out.append(f"{run.path.name}: {why.splitlines()[0][:300]}")
    return out


def run_commands(commands: Sequence[list[str]], sweep_dir: Path, dry_run: bool) -> None:
    """Run a stage's multiruns; a job that diverged is a result, but one that failed otherwise (or
    never finished) stops the study with a ``ConfigError`` listing them, after every command of the
    stage ran."""
    failed = False
    for cmd in commands:
        text = shlex.join(["python", *cmd[1:]])
        print(text, flush=True)
        if dry_run:
            continue
        sweep_dir.mkdir(parents=True, exist_ok=True)
        with (sweep_dir / "study_commands.sh").open("a") as f:
            f.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')}\n{text}\n")
        rc = subprocess.call(cmd)
        if rc != 0:  # a failed or diverged job fails the multirun after every job ran
            failed = True
            log.warning("exit status %d (a job failed or diverged: its metrics.json says how)", rc)
    if failed:
        broken = unfinished_jobs(sweep_dir)
        if broken:
            raise ConfigError(
                f"{len(broken)} job(s) in {sweep_dir} failed for a reason other than divergence or "
                "did not finish; fix the cause and run the same stage again (it resumes):\n  "
                + "\n  ".join(broken)
            )
        log.warning("every failed job diverged (a non-finite loss): results the report counts")
