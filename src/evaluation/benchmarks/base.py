"""What an evaluation task is, and the two generic kinds most benchmarks are made of.

A task is a registered class whose constructor arguments are its config keys
(``conf/benchmarks/<name>.yaml``); ``run(scorer, limit)`` scores the first ``limit`` examples
and returns its metrics. New benchmarks are usually one small subclass:

* ``MultipleChoiceBenchmark`` — implement ``examples()`` yielding ``MultipleChoice(context,
  choices, label)``; each choice is scored as ``context + " " + choice`` and the metrics
  are ``acc`` (highest log-likelihood) and ``acc_norm`` (highest log-likelihood per
  character of the choice), as lm-evaluation-harness's ``multiple_choice`` output type;
* ``CompletionBenchmark`` — implement ``examples()`` yielding ``Completion(context,
  continuation)``; metrics are ``acc`` (the continuation is the greedy one) and ``ppl``
  (exp of the mean negative log-likelihood per example), as the harness's
  ``loglikelihood`` output type.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from scipy import stats

from src.errors import ConfigError, DataError, check_keys
from src.evaluation.scorer import Scorer
from src.registry import Registry

T = TypeVar("T")


class BenchmarkRegistry(Registry["Benchmark"]):
    def get(self, name: str) -> type[Benchmark]:
        if name not in self._discover():
            raise ConfigError(
                f"unknown benchmark type '{name}'; registered: {', '.join(self.names())}. "
                f"Add one with @BENCHMARKS.register('{name}') in src/evaluation/benchmarks/ and a "
                "conf/benchmarks/<entry>.yaml naming it in 'type:'"
            )
        return self._classes[name]


BENCHMARKS = BenchmarkRegistry("benchmark", package="src.evaluation.benchmarks")


@dataclass
class BenchmarkResult:
    """One task's figures. ``tokens`` are the tokens the model read; filled in by the runner."""

    metrics: dict[str, float]
    examples: int
    tokens: int = 0
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)


class Benchmark:
    """Base class; subclasses are registered with ``@BENCHMARKS.register(type_name)``."""

    name: str = ""  # the entry name (``benchmarks.<name>``), set by ``build_benchmark``

    def run(self, scorer: Scorer, limit: int | None = None) -> BenchmarkResult:
        raise NotImplementedError

    @property
    def key(self) -> str:
        """The config prefix of this benchmark's keys, for error messages."""
        return f"benchmarks.{self.name or getattr(self, 'registry_name', 'benchmark')}"


def take(items: Iterable[T], limit: int | None) -> list[T]:
    """The first ``limit`` items (all when ``limit`` is None)."""
    if limit is not None and limit < 0:
        raise ValueError(f"limit={limit} must be >= 0 (or null for all examples)")
    return list(itertools.islice(items, limit))


def stderr_of_mean(values: list[float]) -> float:
    """Standard error of a mean (sample standard deviation / √n, ``scipy.stats.sem``), as the
    harness reports."""
    if len(values) < 2:
        return float("nan")
    return float(stats.sem(values))


@dataclass
class MultipleChoice:
    context: str
    choices: list[str]  # without the delimiter that joins them to the context
    label: int  # index of the correct choice


class MultipleChoiceBenchmark(Benchmark):
    """Pick the choice with the highest log-likelihood given the context."""

    target_delimiter = " "

    def examples(self) -> Iterator[MultipleChoice]:
        raise NotImplementedError

    def run(self, scorer: Scorer, limit: int | None = None) -> BenchmarkResult:
        docs = take(self.examples(), limit)
        requests = [
            scorer.encode_pair(d.context, self.target_delimiter + c)
            for d in docs
            for c in d.choices
        ]
        scores = iter(scorer.loglikelihood(requests, description=self.name or "multiple choice"))
        acc, acc_norm = [], []
        for d in docs:
            lls = [next(scores).logprob for _ in d.choices]
            acc.append(float(max(range(len(lls)), key=lambda i: lls[i]) == d.label))
            # per character, as the harness
            normed = [ll / max(len(c), 1) for ll, c in zip(lls, d.choices)]
            acc_norm.append(float(max(range(len(normed)), key=lambda i: normed[i]) == d.label))
        n = max(len(docs), 1)
        return BenchmarkResult(
            metrics={
                "acc": sum(acc) / n,
                "acc_stderr": stderr_of_mean(acc),
                "acc_norm": sum(acc_norm) / n,
                "acc_norm_stderr": stderr_of_mean(acc_norm),
            },
            examples=len(docs),
        )


@dataclass
class Completion:
    context: str
    continuation: str  # including its leading space, if any


class CompletionBenchmark(Benchmark):
    """Score a fixed continuation: greedy accuracy and perplexity."""

    def examples(self) -> Iterator[Completion]:
        raise NotImplementedError

    def run(self, scorer: Scorer, limit: int | None = None) -> BenchmarkResult:
        docs = take(self.examples(), limit)
        requests = [scorer.encode_pair(d.context, d.continuation) for d in docs]
        scores = scorer.loglikelihood(requests, description=self.name or "completion")
        n = max(len(docs), 1)
        acc = [float(s.is_greedy) for s in scores]
        nll = -sum(s.logprob for s in scores)
        n_target = sum(s.n_tokens for s in scores)
        return BenchmarkResult(
            metrics={
                "acc": sum(acc) / n,
                "acc_stderr": stderr_of_mean(acc),
                "ppl": math.exp(nll / n),  # per example (the harness's definition)
                "token_ppl": math.exp(nll / max(n_target, 1)),
            },  # per target token
            examples=len(docs),
        )


def build_benchmark(name: str, cfg: Mapping[str, Any]) -> Benchmark:
    """A benchmark from its config entry ``benchmarks.<name>`` (the ``type`` key names its
    class)."""
    node = dict(cfg)
    if "type" not in node:
        raise ConfigError(
            f"benchmarks.{name} needs a 'type' key naming its class (one of: "
            f"{', '.join(BENCHMARKS.names())})"
        )
    node["name"] = node.pop("type")
    if node["name"] in BENCHMARKS:
        own = {k: v for k, v in node.items() if k != "name"}
        accepted = BENCHMARKS.accepted_keys(node["name"])
        check_keys(
            own,
            accepted,
            where=f"benchmarks.{name} (type {node['name']})",
            prefix=f"benchmarks.{name}.",
        )
    try:
        cls, kwargs = BENCHMARKS.resolve(node)  # what BENCHMARKS.build does before it constructs
    except ConfigError as e:  # an unknown type or key: say which entry
        raise ConfigError(f"benchmarks.{name}: {e}") from None
    check_input_path(f"benchmarks.{name}.path", kwargs.get("path"))
    task = cls(**kwargs)
    task.name = name
    return task


def check_input_path(key: str, path: Any) -> None:
    """A task's ``path`` must exist before any model is loaded: ``DataError`` naming the key, the
    path as given and as resolved (relative paths are resolved against the directory the command
    ran from; ``hydra.job.chdir`` stays false)."""
    if path is None or str(path) == "":
        return
    given = Path(str(path)).expanduser()
    if not given.exists():
        raise DataError(
            f"{key}='{path}' does not exist (resolved to {given.resolve()}; a relative path is "
            f"read from the directory the command ran in, {Path.cwd()}); give the file's absolute "
            "path or a path relative to that directory"
        )
