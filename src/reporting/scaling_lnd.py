"""The D axis of the scaling report: ``L(N, D) = E + A·N^(−α) + B·D^(−β)`` per arm
(src.studies.chinchilla, Hoffmann et al. 2022 approach 3) on the points of
``python -m src.report scaling`` (src/reporting/scaling.py), N = the run's parameters and
D = its ``tokens_seen`` (metrics.json).

* **D axis.** The varying keys, other than the size factor, along which D changes by ×1.5 or
  more at a fixed size and fixed other keys (``trainer.max_steps`` of cooldown branches), or
  those ``--d-key`` names. They leave the arm: an arm here is today's arm without them.
* **When.** The fit runs when some size of some arm has runs at 2 or more distinct D; with
  ``--lnd`` it must run, and each reason it cannot is a ``ConfigError``; without, the reason is
  one note of ``scaling.md``.
* **Trunks.** The points at one size and seed come from one WSD trunk: a branch names it by
  ``scheduler.decay_from`` (its run directory: the checkpoint's, above ``checkpoints/``), a run
  without it is itself a trunk. A branch's trunk is matched to a trunk run of the same arm, size
  and seed by the longest common tail of their paths (a sweep moved under ``runs/`` still
  matches), else kept as its own name. ``check_trunks`` refuses two at one size.
* **Advantage.** For each pair of arms (a, b) at each size both ran, with each arm's own N there:
  ``L_b(N_b, D) − L_a(N_a, D)`` at the smallest and largest D both ran, and its change between
  them, with 95 % intervals over the paired bootstrap replicates. "shrinks" when the change's
  interval lies wholly on the side that moves the advantage at D_min toward 0, "grows" when
  wholly on the other side, else "no verdict".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath

import numpy as np

from src.errors import ConfigError
from src.studies.chinchilla import (
    BRANCH_KEY,
    LossLaw,
    LossLawFit,
    bootstrap_loss_law,
    check_trunks,
)
from src.studies.runs import RunRecord, config_value

D_RATIO = 1.5  # a key is on the D axis when D changes by this factor or more along it


@dataclass
class LndPoint:
    arm: str  # the arm without the D keys
    size: str
    params: float
    tokens: float  # D: metrics.json tokens_seen
    seed: str
    loss: float
    trunk: str


@dataclass
class Advantage:
    arms: tuple[str, str]
    size: str
    params: tuple[float, float]  # N of arm a, of arm b at this size
    tokens: tuple[float, float]  # D_min, D_max
    at_min: float  # L_b − L_a at D_min
    at_max: float
    change: float  # at_max − at_min
    ci: dict[str, tuple[float, float] | None]  # at_min, at_max, change -> 95 % interval
    verdict: str  # shrinks | grows | no verdict


@dataclass
class LndAnalysis:
    d_keys: list[str]
    compute: float  # the budget C (FLOPs) of the compute-optimal N and D
    points: list[LndPoint]
    fits: dict[str, LossLawFit]  # baseline arm first
    advantages: list[Advantage]
    notes: list[str] = field(default_factory=list)


def d_keys_of(points: Sequence[LndPoint], values: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The arm keys along which D changes ×``D_RATIO`` or more (module docstring); ``points``
    carry today's arm labels, ``values`` map them to their keys' values."""
    keys = list(next(iter(values.values()), {}))
    out = []
    for k in keys:
        groups: dict[tuple[str, ...], dict[str, list[float]]] = {}
        for p in points:
            v = values[p.arm]
            rest = (p.size, *(v[o] for o in keys if o != k))
            groups.setdefault(rest, {}).setdefault(v[k], []).append(p.tokens)
        for by_value in groups.values():
            med = [float(np.median(d)) for d in by_value.values()]
            if len(med) > 1 and max(med) / min(med) >= D_RATIO:
                out.append(k)
                break
    return out


def _trunk_dir(path: str) -> PurePath:
    p = PurePath(path)
    return p.parent.parent if p.parent.name == "checkpoints" else p.parent


def _tail(a: Sequence[str], b: Sequence[str]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def trunk_names(groups: Mapping[tuple[str, str, str], Sequence[RunRecord]]) -> dict[str, str]:
    """run directory -> the name of its trunk, per (arm, size, seed) group (module docstring)."""
    out: dict[str, str] = {}
    for runs in groups.values():
        trunks = [r for r in runs if not config_value(r.config, BRANCH_KEY)]
        for r in runs:
            source = config_value(r.config, BRANCH_KEY)
            if not source:
                out[str(r.path)] = str(r.path)
                continue
            want = [x for x in _trunk_dir(source).parts if x not in (".", "..", "/")]
            scored = sorted(
                ((_tail(want, t.path.parts), str(t.path)) for t in trunks), reverse=True
            )
            best = [s for s in scored if s[0] == scored[0][0]] if scored else []
            matched = len(best) == 1 and best[0][0] > 0
            out[str(r.path)] = best[0][1] if matched else str(_trunk_dir(source))
    return out


def collect(
    points: Sequence[object],
    runs: Sequence[RunRecord],
    values: Mapping[str, Mapping[str, str]],
    d_keys: Sequence[str] | None,
) -> tuple[list[LndPoint], list[str]]:
    """The report's points (``ScalingPoint``) with D and trunk, arms without the D keys."""
    by_dir = {str(r.path): r for r in runs}
    raw = []
    for p in points:
        r = by_dir[p.run_dir]  # type: ignore[attr-defined]
        tokens = r.metric("tokens_seen")
        if not tokens or not math.isfinite(tokens):
            raise ConfigError(
                f"{r.path / 'metrics.json'} has no tokens_seen (D of an L(N, D) fit); rerun it "
                "with this version's trainer, or leave the run out"
            )
        raw.append((p, r, tokens))
    pts = [LndPoint(p.arm, p.size, p.params, t, p.seed, p.loss, "") for p, _, t in raw]  # type: ignore[attr-defined]
    keys = list(d_keys) if d_keys is not None else d_keys_of(pts, values)
    arm_keys = list(next(iter(values.values()), {}))
    if unknown := [k for k in keys if k not in arm_keys]:
        raise ConfigError(
            f"--d-key {', '.join(unknown)}: not a key that varies between the arms; choose among "
            f"{arm_keys or 'none (no key but the size varies)'}"
        )
    for p in pts:
        v = values[p.arm]
        p.arm = ", ".join(x for k, x in v.items() if k not in keys) or "(all)"
    groups: dict[tuple[str, str, str], list[RunRecord]] = {}
    for p, (_, r, _) in zip(pts, raw):
        groups.setdefault((p.arm, p.size, p.seed), []).append(r)
    names = trunk_names(groups)
    for p, (_, r, _) in zip(pts, raw):
        p.trunk = names[str(r.path)]
    return pts, keys


def _one_budget(arm: str, pts: Sequence[LndPoint]) -> bool:
    sizes: dict[str, set[float]] = {}
    for p in pts:
        if p.arm == arm:
            sizes.setdefault(p.size, set()).add(p.tokens)
    return all(len(d) < 2 for d in sizes.values())


def fit_arm(arm: str, pts: Sequence[LndPoint], n_boot: int, seed: int) -> LossLawFit:
    """One arm's L(N, D): its D axis, its trunks, then the fit (each refusal one line)."""
    mine = [p for p in pts if p.arm == arm]
    if _one_budget(arm, mine):
        raise ConfigError(
            f"arm {arm}: one token budget D (metrics.json tokens_seen) at every size, so B and β "
            "of L(N, D) are not identified; run cooldown branches (scheduler.decay_from) at 2 or "
            "more budgets per size"
        )
    for s in sorted({p.seed for p in mine}):
        trunks: dict[float, set[str]] = {}
        for p in mine:
            if p.seed == s:
                trunks.setdefault(p.params, set()).add(p.trunk)
        check_trunks(trunks, label=f"arm {arm}, seed {s}")
    by_point: dict[tuple[float, float], list[float]] = {}
    for p in mine:
        by_point.setdefault((p.params, p.tokens), []).append(p.loss)
    return bootstrap_loss_law(by_point, n_boot, seed, label=f"arm {arm}")


def analyse_lnd(
    points: Sequence[object],
    runs: Sequence[RunRecord],
    values: Mapping[str, Mapping[str, str]],
    order: Sequence[str],
    *,
    required: bool,
    compute: float | None = None,
    d_keys: Sequence[str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> LndAnalysis:
    """L(N, D) per arm (module docstring), the arms in the order of today's arms ``order``
    (the baseline first). Raises ``ConfigError`` when no fit can run; an arm that cannot be fitted
    raises under ``required``, else becomes a note."""
    today = [p.arm for p in points]  # type: ignore[attr-defined]
    pts, keys = collect(points, runs, values, d_keys)
    renamed = dict(zip(today, (p.arm for p in pts)))
    arms = list(dict.fromkeys(renamed[a] for a in order if a in renamed))
    if all(_one_budget(a, pts) for a in arms):
        raise ConfigError(
            "every size of every arm has runs at one token budget D (metrics.json tokens_seen), "
            "so L(N, D) cannot be fitted; run cooldown branches (scheduler.decay_from) at 2 or "
            "more budgets per size (without --lnd the report fits L(N) alone)"
        )
    fits, notes = {}, []
    for i, arm in enumerate(arms):
        try:
            fits[arm] = fit_arm(arm, pts, n_boot, seed + i)
        except ConfigError as e:
            if required:
                raise
            notes.append(f"not fitted: {e}")
    c = compute or max(6.0 * p.params * p.tokens for p in pts)
    return LndAnalysis(keys, c, pts, fits, advantages(pts, fits), notes)


def _ci(values: np.ndarray) -> tuple[float, float] | None:
    if not len(values):
        return None
    lo, hi = np.percentile(values, [2.5, 97.5])
    return float(lo), float(hi)


def verdict(at_min: float, ci: tuple[float, float] | None) -> str:
    """shrinks | grows | no verdict: the change's interval against the advantage's sign at D_min."""
    if ci is None:
        return "no verdict"
    if at_min == 0:
        return "grows" if ci[0] > 0 or ci[1] < 0 else "no verdict"
    toward = (-1.0 if at_min > 0 else 1.0) * np.array(ci)  # > 0: a change toward 0
    if toward.min() > 0:
        return "shrinks"
    return "grows" if toward.max() < 0 else "no verdict"


def _gap(fa: LossLaw, fb: LossLaw, na: float, nb: float, d: float) -> float:
    return float(fb(nb, d) - fa(na, d))


def advantage(
    arms: tuple[str, str], size: str, pts: Sequence[LndPoint], fa: LossLawFit, fb: LossLawFit
) -> Advantage | None:
    """The pair at one size (module docstring); None when they share no span of D."""
    pa = [p for p in pts if p.arm == arms[0] and p.size == size]
    pb = [p for p in pts if p.arm == arms[1] and p.size == size]
    if not pa or not pb:
        return None
    d_lo = max(min(p.tokens for p in pa), min(p.tokens for p in pb))
    d_hi = min(max(p.tokens for p in pa), max(p.tokens for p in pb))
    if d_hi <= d_lo:
        return None
    na, nb = float(np.mean([p.params for p in pa])), float(np.mean([p.params for p in pb]))
    at_min, at_max = (_gap(fa.law, fb.law, na, nb, d) for d in (d_lo, d_hi))
    reps = list(zip(fa.replicates, fb.replicates))
    lo = np.array([_gap(f, g, na, nb, d_lo) for f, g in reps])
    hi = np.array([_gap(f, g, na, nb, d_hi) for f, g in reps])
    ci = {"at_min": _ci(lo), "at_max": _ci(hi), "change": _ci(hi - lo)}
    return Advantage(
        arms,
        size,
        (na, nb),
        (d_lo, d_hi),
        at_min,
        at_max,
        at_max - at_min,
        ci,
        verdict(at_min, ci["change"]),
    )


def advantages(pts: Sequence[LndPoint], fits: Mapping[str, LossLawFit]) -> list[Advantage]:
    """Each pair of fitted arms at each size both ran, sizes in ascending N."""
    arms = list(fits)
    sizes = sorted({p.size for p in pts}, key=lambda s: min(p.params for p in pts if p.size == s))
    pairs = [(a, b) for i, a in enumerate(arms) for b in arms[i + 1 :]]
    found = (advantage((a, b), s, pts, fits[a], fits[b]) for a, b in pairs for s in sizes)
    return [x for x in found if x is not None]
