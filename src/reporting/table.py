"""The report's figures: one row per variant (its tuned values, verdict-run summaries, compute),
the comparisons of the family, and the n-gram reference rows.

Everything here is computed from the runs' files: the verdict metric and each secondary one
over the verdict runs' seeds (``src.studies.tuning``), compared against the baseline variant
(and, with ``comparisons: one_factor``, between every pair of variants that differ in one
factor), all corrected together (``src.reporting.comparisons``). An evaluation-time variant
(``--eval-variants``: the same weights scored with a RoPE scaling, ``src.studies.eval_variants``)
enters a comparison only on the figures its scaling changed.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from src.errors import ConfigError
from src.reporting.comparisons import Comparison, compare, decide, margin_for
from src.reporting.families import declare_primary, interaction_rows
from src.reporting.stats import Summary, summarize
from src.studies.eval_variants import changed_by_scaling
from src.studies.outcomes import OUTCOMES, run_outcome
from src.studies.protocol import Protocol, compared_factor
from src.studies.runs import RunRecord, Variant, finite
from src.studies.tuning import TunedVariant

#: Secondary metrics reported when the runs have them and no protocol names its own (fnmatch
#: patterns).
DEFAULT_SECONDARY = ("extrapolation/ppl@*", "*/bleu", "*/chrf", "grad_norm/*.last_over_first")
#: Overrides that ``python -m src.study`` solves per variant under flops / tokens matching (not
#: factors).
MATCHED_KEYS = ("trainer.max_steps",)


@dataclass
class Compute:
    """What a variant costs (verdict runs): parameters, FLOPs per token and in all (budget.json)."""

    params: Summary
    flops_per_token: Summary  # training (forward + backward) FLOPs per token, the model's own count
    tokens: Summary  # training tokens up to the weights the verdict scored (scored_tokens)
    train_flops: Summary  # flops_per_token x those tokens, per run
    match: str  # params | flops | tokens | none (how the variant was matched)
    throughput: Summary
    wall: Summary


@dataclass
class VariantRow:
    tuned: TunedVariant
    label: str
    short: str  # the label with keys shortened (n_layer=6), for legends
    outcomes: Counter  # over all the variant's runs
    primary: Summary  # the verdict metric over the verdict runs
    secondary: dict[str, Summary]
    compute: Compute
    comparison: Comparison | None = None  # primary metric vs the baseline (None for the baseline)
    errors: list[str] = field(default_factory=list)
    evaluation_of: str | None = (
        None  # an evaluation-time variant (--eval-variants): the label of the trained variant
    )

    def compared_on(self, key: str) -> bool:
        """Whether the row enters a comparison on ``key``: always, unless it is an evaluation-time
        variant and ``key`` is not a figure its scaling changed (a repeat of its parent's would only
        inflate the family)."""
        return self.evaluation_of is None or changed_by_scaling(counted(self.runs), key)

    @property
    def variant(self) -> Variant:
        return self.tuned.variant

    @property
    def runs(self) -> list[RunRecord]:
        """The verdict runs."""
        return self.tuned.verdict_runs

    @property
    def status(self) -> str:
        return ", ".join(f"{self.outcomes[o]} {o}" for o in OUTCOMES if self.outcomes.get(o))

    @property
    def diverged(self) -> tuple[int, int]:
        """(diverged, counted) verdict runs: a variant that fails on some seeds is never hidden by
        the mean over the seeds that survived (the mean leaves the non-finite ones out)."""
        outcomes = [run_outcome(r) for r in counted(self.runs)]
        return sum(o == "diverged" for o in outcomes), len(outcomes)


@dataclass
class Reference:
    """A smoothed n-gram model scored on the runs' validation and test tokens (ngram.json)."""

    order: int
    val: float | None
    test: float | None
    val_tokens: int | None
    test_tokens: int | None

    @property
    def name(self) -> str:
        return {1: "unigram", 2: "bigram", 3: "trigram"}.get(self.order, f"{self.order}-gram")

    def loss(self, split: str) -> float | None:
        return self.val if split == "val" else self.test if split == "test" else None


@dataclass
class Report:
    protocol: Protocol
    rows: list[VariantRow]
    baseline: int
    varying: list[str]
    shared: dict[str, str]
    secondary: list[str]
    comparisons: list[Comparison]  # every comparison, of every family
    sizes: dict[str, int]  # each family's tested comparisons (its Holm m), the primary first
    alpha: float
    references: list[Reference]
    reference_note: str


def _natural(key: str) -> tuple[Any, ...]:
    """'ppl@4x' after 'ppl@2x' (numbers compared as numbers)."""
    return tuple(
        float(t) if t.replace(".", "", 1).isdigit() else t
        for t in re.split(r"(\d+(?:\.\d+)?)", key)
    )


def metric_keys(
    runs: Sequence[RunRecord], patterns: Sequence[str], exclude: Sequence[str] = ()
) -> list[str]:
    """metrics keys matching ``patterns`` (numbers or nulls in at least one run), in pattern
    order."""
    keys: list[str] = []
    for pat in patterns:
        found = sorted(
            {
                k
                for r in runs
                for k, v in (r.metrics or {}).items()
                if fnmatch.fnmatch(k, pat)
                and (v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)))
            },
            key=_natural,
        )
        keys += [k for k in found if k not in keys and k not in exclude]
    return keys


def short_label(variant: Variant, keys: Sequence[str]) -> str:
    """``model.n_layer=6, optim.lr=0.01`` -> ``n_layer=6, lr=0.01`` (full keys when shortening is
    ambiguous)."""
    short = [k.replace("/", ".").split(".")[-1] for k in keys]
    if len(set(short)) < len(short):
        return variant.label(keys)
    d = variant.values()
    return ", ".join(f"{s}={d[k]}" for s, k in zip(short, keys) if k in d) or "(defaults)"


def counted(runs: Sequence[RunRecord]) -> list[RunRecord]:
    """The runs whose results count (not failed or incomplete)."""
    return [r for r in runs if run_outcome(r) in ("ok", "no validation", "diverged")]


def values(runs: Sequence[RunRecord], key: str) -> list[float]:
    """The finite final values of ``key`` over the runs that count."""
    return finite(r.metric(key) for r in counted(runs))


#: config keys that, with the seed, fix a run's batches (``src.data.batches``: a batch is a pure
#: function of seed, rank and batch index, given the data, the window length, the batch size and the
#: world size)
DATA_ORDER_KEYS = (
    "data",
    "block_size",
    "batch_size",
    "trainer.devices",
    "trainer.num_nodes",
    "trainer.accumulate_grad_batches",
)


def data_order(run: RunRecord) -> tuple[str | None, ...]:
    """What, besides the seed, decides which batches a run reads (``DATA_ORDER_KEYS``)."""
    return tuple(
        json.dumps(_node(run.config, k), sort_keys=True, default=str) for k in DATA_ORDER_KEYS
    )


def _node(config: dict[str, Any], key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def compare_rows(
    key: str,
    a: VariantRow,
    b: VariantRow,
    margin: float | None,
    pairing: str,
    test: str = "auto",
) -> Comparison:
    """``a`` against ``b`` on ``key``, paired by seed where both read the same batches for a
    seed."""
    ra, rb = counted(a.runs), counted(b.runs)
    same_data = len({data_order(r) for r in (*ra, *rb)}) == 1
    return compare(
        key,
        a.label,
        b.label,
        [r.metric(key) for r in ra],
        [r.metric(key) for r in rb],
        margin,
        seeds=([r.seed for r in ra], [r.seed for r in rb]),
        same_data=same_data,
        pairing=pairing,
        test=test,
    )


def scored_tokens(run: RunRecord) -> float | None:
    """Training tokens up to the weights the run's test scored: ``tokens_seen`` scaled to
    ``scored_step`` (metrics.json: the best checkpoint's step, or the final one); all of them
    without that record."""
    tokens, step, total = (
        run.metric("tokens_seen"),
        run.metric("scored_step"),
        run.metric("global_step"),
    )
    if tokens is None or step is None or not total:
        return tokens
    return tokens * step / total


def compute_of(runs: Sequence[RunRecord]) -> Compute:
    per_token = [(r.budget or {}).get("flops_per_token") for r in runs]
    tokens = [scored_tokens(r) for r in runs]
    modes = {str((r.budget or {}).get("match") or "none") for r in runs}
    return Compute(
        params=summarize([r.metric("params") for r in runs]),
        flops_per_token=summarize(per_token),
        tokens=summarize(tokens),
        train_flops=summarize(
            [f * t if f is not None and t is not None else None for f, t in zip(per_token, tokens)]
        ),
        match="/".join(sorted(modes)),
        throughput=summarize([r.metric("throughput_tokens_per_s") for r in runs]),
        wall=summarize([r.metric("wall_time_s") for r in runs]),
    )


def references_of(rows: Sequence[VariantRow], baseline: int) -> tuple[list[Reference], str]:
    """The n-gram rows (ngram.json) and a note: the same everywhere, or the baseline's."""
    found: dict[str, list[str]] = {}
    for row in rows:
        for r in row.variant.runs:
            data = (
                (r.path / "ngram.json").read_text() if (r.path / "ngram.json").is_file() else None
            )
            if data:
                d = json.loads(data)
                found.setdefault(
                    json.dumps({s: d.get(s) for s in ("val", "test")}, sort_keys=True), []
                ).append(row.label)
    if not found:
        return [], (
            "no run has ngram.json: add the NgramReference callback "
            "(conf/experiment/study_common.yaml has it) for smoothed n-gram reference rows"
        )
    base = rows[baseline].label if rows else None
    key = next((k for k, labels in found.items() if base in labels), next(iter(found)))
    note = (
        ""
        if len(found) == 1
        else (
            f"the runs' n-gram references differ ({len(found)} sets: different tokens); "
            f"shown: those of {base}'s runs"
        )
    )
    d = json.loads(key)
    orders = sorted({int(k) for s in ("val", "test") for k in (d.get(s) or {})})
    refs = [
        Reference(
            o,
            *(((d.get(s) or {}).get(str(o)) or {}).get("loss") for s in ("val", "test")),
            *(((d.get(s) or {}).get(str(o)) or {}).get("tokens") for s in ("val", "test")),
        )
        for o in orders
    ]
    return refs, note


def build_report(
    tuned: Sequence[TunedVariant],
    varying: Sequence[str],
    shared: dict[str, str],
    protocol: Protocol,
    *,
    baseline: int = 0,
    alpha: float = 0.05,
    secondary: Sequence[str] = (),
    pairing: str = "auto",
) -> Report:
    """Rows, the family of comparisons (decided together) and the reference rows; ``pairing``:
    auto (paired by seed where both sides share seeds and data order) | paired | unpaired."""
    all_runs = [r for t in tuned for r in t.verdict_runs]
    metric = protocol.metric
    sec = metric_keys(all_runs, secondary, exclude=[metric])
    rows = []
    label_of = {id(r): t.variant.label(varying) for t in tuned for r in t.variant.runs}
    for t in tuned:
        runs = t.verdict_runs
        parent = next(
            (r.evaluation_of for r in t.variant.runs if r.evaluation_of is not None), None
        )
        rows.append(
            VariantRow(
                tuned=t,
                label=t.variant.label(varying),
                short=short_label(t.variant, varying),
                outcomes=Counter(run_outcome(r) for r in t.variant.runs),
                primary=summarize(values(runs, metric)),
                secondary={k: summarize(values(runs, k)) for k in sec},
                compute=compute_of(runs),
                errors=[
                    f"{r.path.name}: {(r.metrics or {}).get('error')}"
                    for r in t.variant.runs
                    if run_outcome(r) == "failed" and (r.metrics or {}).get("error")
                ],
                evaluation_of=None if parent is None else label_of.get(id(parent), "?"),
            )
        )
    comps: list[Comparison] = []
    pairs = [(i, baseline) for i in range(len(rows)) if i != baseline]
    # under flops / tokens matching each variant carries its solved trainer.max_steps (python -m
    # src.study): a consequence of the factors, not a factor of its own
    keys = [k for k in varying if not (k in MATCHED_KEYS and protocol.match in ("flops", "tokens"))]
    along = compared_factor(protocol.comparisons)
    if along is not None:
        # an ablation: each variant against the same variant under another value of `along`, and
        # nothing else
        if along not in varying:
            raise ConfigError(
                f"--comparisons {protocol.comparisons}: {along!r} is not a factor these runs vary; "
                f"they vary {', '.join(varying) or 'nothing'}"
            )
        pairs = []
        for i in range(len(rows)):
            for j in range(i + 1, len(rows)):
                a, b = rows[i].variant.values(), rows[j].variant.values()
                if a.get(along) != b.get(along) and all(
                    a.get(k) == b.get(k) for k in keys if k != along
                ):
                    # (variant, reference): the later-listed side is the variant, unless it is the
                    # baseline
                    pairs.append((i, j) if j == baseline else (j, i))
    elif protocol.comparisons == "one_factor":
        for i in range(len(rows)):
            for j in range(i + 1, len(rows)):
                a, b = rows[i].variant.values(), rows[j].variant.values()
                if baseline not in (i, j) and sum(a.get(k) != b.get(k) for k in keys) == 1:
                    pairs.append((j, i))

    def pair(key: str, i: int, j: int) -> Comparison:
        margin = margin_for(key, protocol.equivalence_margin, metric)
        return compare_rows(key, rows[i], rows[j], margin, pairing, protocol.test)

    for i, j in pairs:
        for key in [metric, *sec]:
            if not (rows[i].compared_on(key) and rows[j].compared_on(key)):
                continue
            comps.append(pair(key, i, j))
    variants, labels = [r.variant for r in rows], [r.label for r in rows]
    declare_primary(protocol.primary, comps, variants, labels, metric, pair)
    comps += interaction_rows(
        protocol.interactions,
        variants,
        labels,
        varying,
        protocol,
        lambda i: counted(rows[i].runs),
        lambda idx: len({data_order(r) for i in idx for r in counted(rows[i].runs)}) == 1,
        pairing,
    )
    for c in comps:
        if c.metric == metric and c.reference == labels[baseline] and c.variant in labels:
            rows[labels.index(c.variant)].comparison = c
    sizes = decide(comps, alpha)
    refs, note = references_of(rows, baseline) if rows else ([], "")
    return Report(
        protocol, rows, baseline, list(varying), dict(shared), sec, comps, sizes, alpha, refs, note
    )
