"""HellaSwag (Zellers et al. 2019): choose the plausible ending of an ActivityNet / WikiHow
context among 4; zero-shot by log-likelihood, as lm-evaluation-harness ``hellaswag``.

query = preprocess(activity_label + ": " + ctx_a + " " + ctx_b.capitalize());
choices = [preprocess(ending)]; each is scored as query + " " + choice. ``acc_norm``
divides each choice's log-likelihood by its length in characters.

Two file formats are read (``path``):

* the original ``hellaswag_val.jsonl`` (keys ``activity_label, ctx_a, ctx_b, endings,
  label``), the same rows the ``Rowan/hellaswag`` dataset download gives — exact;
* llama.cpp's text format (``hellaswag_val_full.txt[.bz2]``, 6 lines per item:
  ``activity_label: ctx``, the gold label, 4 endings), already bracket-cleaned upstream.
  It lost the ctx_a / ctx_b split, so ``ctx_b.capitalize()`` is reconstructed: the
  fragment after the last sentence end is capitalised when it starts in lower case.
  This matches the harness's query for the usual ActivityNet item ("… on a roof. he" ->
  "… on a roof. He") and may differ in a few WikiHow items.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

from src.evaluation.benchmarks.base import BENCHMARKS, MultipleChoice, MultipleChoiceBenchmark
from src.evaluation.inputs import load_hf_dataset, looks_like_jsonl, open_text, read_jsonl


def preprocess(text: str) -> str:
    """lm-evaluation-harness's HellaSwag cleanup: WikiHow's ``[title]`` becomes a sentence
    break, other ``[…]`` markers go, double spaces collapse."""
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def from_record(doc: dict[str, Any]) -> MultipleChoice:
    """An original jsonl / ``datasets`` row -> MultipleChoice."""
    ctx = doc["ctx_a"] + " " + doc["ctx_b"].capitalize()
    return MultipleChoice(
        context=preprocess(doc["activity_label"] + ": " + ctx),
        choices=[preprocess(e) for e in doc["endings"]],
        label=int(doc["label"]),
    )


_SENTENCE_END = re.compile(r"[.!?]\s+")


def capitalize_last_fragment(query: str) -> str:
    """Reconstruct ``ctx_b.capitalize()`` on a text-format query (see module docstring)."""
    ends = list(_SENTENCE_END.finditer(query))
    start = ends[-1].end() if ends else query.find(": ") + 2 if ": " in query else 0
    fragment = query[start:]
    if fragment[:1].islower():
        return query[:start] + fragment.capitalize()
    return query


def read_text_format(path: str) -> Iterator[MultipleChoice]:
    """llama.cpp's 6-lines-per-item HellaSwag text format (read lazily)."""
    with open_text(path) as f:
        for n, item in enumerate(iter(lambda: [line for line in itertools.islice(f, 6)], [])):
            if len(item) < 6:
                raise ValueError(
                    f"{path}: item {n} is cut short ({len(item)} of 6 lines: query, label, 4 "
                    "endings)"
                )
            query, label, *endings = (line.rstrip("\n") for line in item)
            if label.strip() not in ("0", "1", "2", "3"):
                raise ValueError(f"{path}:{6 * n + 2}: expected a gold label 0-3, found {label!r}")
            yield MultipleChoice(
                context=preprocess(capitalize_last_fragment(query)),
                choices=[preprocess(e) for e in endings],
                label=int(label),
            )


@BENCHMARKS.register("hellaswag")
class HellaSwag(MultipleChoiceBenchmark):
    """Source: ``path`` (either format, optionally compressed) or the ``dataset`` download."""

    def __init__(
        self,
        path: str | None = None,
        dataset: str = "Rowan/hellaswag",
        dataset_config: str | None = None,
        split: str = "validation",
    ) -> None:
        self.path, self.dataset, self.dataset_config, self.split = (
            path,
            dataset,
            dataset_config,
            split,
        )

    def examples(self) -> Iterator[MultipleChoice]:
        if self.path:
            if looks_like_jsonl(self.path):
                return (from_record(r) for r in read_jsonl(self.path))
            return read_text_format(self.path)
        ds = load_hf_dataset(self.dataset, self.dataset_config, self.split, self.key)
        return (from_record(r) for r in ds)
