"""A report's declared questions against its variants: the primary family and the interactions.

``protocol.primary`` (``src.studies.questions.Contrast``) names comparisons by their variants'
overrides; each becomes the comparison of that pair on its metric, in the ``PRIMARY`` family, under
its own id. ``protocol.interactions`` (``Interaction``) each become one more comparison: the per-seed
difference ``variant - reference`` under ``factor=conditions[0]`` against the same under
``conditions[1]``. When the four variants share their seeds and data order the two differences are
paired by seed, so the test is the one-sample test of the difference of differences

    I_s = (A_x,s - B_x,s) - (A_y,s - B_y,s)

(the paired t-test or the sign-flip test of ``d_x`` against ``d_y``: the same thing); otherwise the
differences of each condition are compared unpaired. A secondary interaction is in the exploratory
family ``interactions: <metric>``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from src.errors import ConfigError
from src.reporting.comparisons import PRIMARY, Comparison, compare
from src.studies.protocol import Protocol, canonical
from src.studies.questions import Contrast, Interaction, parse_spec
from src.studies.runs import Variant, config_value


def variant_value(v: Variant, key: str) -> str:
    """The variant's value of ``key``: its override, else its runs' config value."""
    found = v.values().get(key)
    return canonical(
        found if found is not None else config_value(v.runs[0].config, key) if v.runs else ""
    )


def matching(wanted: Mapping[str, str], variants: Sequence[Variant]) -> list[int]:
    """Indices of the variants whose values include every ``key: value`` of ``wanted``."""
    want = {k.lstrip("+"): canonical(v) for k, v in wanted.items()}
    return [
        i
        for i, v in enumerate(variants)
        if all(variant_value(v, k) == val for k, val in want.items())
    ]


def one_variant(
    wanted: Mapping[str, str], variants: Sequence[Variant], labels: Sequence[str], where: str
) -> int:
    """The one variant ``wanted`` names; a ``ConfigError`` naming ``where`` when none or several
    match."""
    found = matching(wanted, variants)
    spec = ",".join(f"{k}={v}" for k, v in wanted.items())
    if len(found) == 1:
        return found[0]
    if not found:
        raise ConfigError(
            f"{where}={spec!r} names no variant the runs have; the variants: {'; '.join(labels)}"
        )
    raise ConfigError(
        f"{where}={spec!r} names {len(found)} variants ({'; '.join(labels[i] for i in found)}); "
        "add the factors that tell them apart"
    )


#: compare_rows(metric, variant index, reference index) -> the unadjusted comparison
CompareRows = Callable[[str, int, int], Comparison]


def declare_primary(
    contrasts: Sequence[Contrast],
    comparisons: list[Comparison],
    variants: Sequence[Variant],
    labels: Sequence[str],
    metric: str,
    compare_rows: CompareRows,
) -> None:
    """Each declared contrast's comparison joins the primary family under its id, in place: the
    report's own comparison of that pair when it made one, else a new one."""
    for n, q in enumerate(contrasts):
        where = f"protocol.primary[{n}]"
        i = one_variant(
            parse_spec(q.variant, f"{where}.variant"), variants, labels, where + ".variant"
        )
        j = one_variant(
            parse_spec(q.reference, f"{where}.reference"), variants, labels, where + ".reference"
        )
        key = q.metric or metric
        found = next(
            (
                c
                for c in comparisons
                if (c.metric, c.variant, c.reference) == (key, labels[i], labels[j])
            ),
            None,
        )
        if found is None:
            # the other orientation, if the report made it, is the same test: keep one
            comparisons[:] = [
                c
                for c in comparisons
                if (c.metric, c.variant, c.reference) != (key, labels[j], labels[i])
            ]
            found = compare_rows(key, i, j)
            comparisons.append(found)
        found.family, found.row, found.expect = PRIMARY, q.id, q.expect


def interaction_rows(
    interactions: Sequence[Interaction],
    variants: Sequence[Variant],
    labels: Sequence[str],
    varying: Sequence[str],
    protocol: Protocol,
    runs_of: Callable[[int], Sequence[Any]],
    same_data: Callable[[Sequence[int]], bool],
    pairing: str,
) -> list[Comparison]:
    """One comparison per declared interaction (module docstring). ``runs_of(i)``: the counted
    verdict runs of variant ``i`` (``.seed``, ``.metric(key)``); ``same_data``: whether variants
    read the same batches for a seed."""
    out = []
    for n, q in enumerate(interactions):
        where = f"protocol.interactions[{n}]"
        if q.factor not in varying:
            raise ConfigError(
                f"{where}.factor={q.factor!r} is not a factor these runs vary; they vary "
                f"{', '.join(varying) or 'nothing'}"
            )
        taken = sorted({variant_value(v, q.factor) for v in variants})
        for cond in q.conditions:
            if canonical(cond) not in taken:
                raise ConfigError(
                    f"{where}.conditions: {cond!r} is not a value of {q.factor} in these runs; "
                    f"its values: {', '.join(taken)}"
                )
        key = q.metric or protocol.metric
        idx = {}
        for side in ("variant", "reference"):
            spec = parse_spec(getattr(q, side), f"{where}.{side}")
            for cond in q.conditions:
                idx[side, cond] = one_variant(
                    {**spec, q.factor: cond}, variants, labels, f"{where}.{side} at {q.factor}"
                )
        diffs, seeds = [], []
        for cond in q.conditions:
            a = {r.seed: r.metric(key) for r in runs_of(idx["variant", cond])}
            b = {r.seed: r.metric(key) for r in runs_of(idx["reference", cond])}
            shared = sorted(
                (s for s in set(a) & set(b) if a[s] is not None and b[s] is not None), key=str
            )
            diffs.append([float(a[s]) - float(b[s]) for s in shared])
            seeds.append(shared)
        label = f"({q.variant} − {q.reference})"
        c = compare(
            key,
            f"{label} at {q.factor}={q.conditions[0]}",
            f"{label} at {q.factor}={q.conditions[1]}",
            diffs[0],
            diffs[1],
            seeds=(seeds[0], seeds[1]),
            same_data=same_data(list(idx.values())),
            pairing=pairing,
            test=protocol.test,
        )
        c.row, c.interaction = q.id, True
        c.family = PRIMARY if q.family == PRIMARY else f"interactions: {key}"
        if not all(seeds):
            c.reason = (
                f"no seed shared by {q.variant} and {q.reference} under "
                f"{q.factor}={q.conditions[seeds.index([]) if [] in seeds else 0]}"
            )
        out.append(c)
    return out
