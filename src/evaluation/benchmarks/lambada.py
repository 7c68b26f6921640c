"""LAMBADA (Paperno et al. 2016), OpenAI's detokenized test set as in GPT-2 §3.3 and
lm-evaluation-harness ``lambada_openai``: 5,153 passages whose last word is predictable
only from the broad context.

context = the passage without its last word (and without that word's leading space);
target = " " + last word. ``acc``: every target BPE token is the greedy prediction;
``ppl``: exp of the mean over passages of the target's total negative log-likelihood.
"""

from __future__ import annotations

from collections.abc import Iterator

from src.evaluation.benchmarks.base import BENCHMARKS, Completion, CompletionBenchmark
from src.evaluation.inputs import load_hf_dataset, read_jsonl


def split_last_word(text: str) -> Completion:
    """'… I don't care about signs' -> Completion('… I don't care about', ' signs')."""
    context, _, word = text.rpartition(" ")
    return Completion(context, " " + word)


@BENCHMARKS.register("lambada")
class Lambada(CompletionBenchmark):
    """Source: ``path`` (``lambada_test.jsonl``, records ``{"text": …}``) or the
    ``dataset`` / ``dataset_config`` / ``split`` download."""

    def __init__(
        self,
        path: str | None = None,
        dataset: str = "EleutherAI/lambada_openai",
        dataset_config: str | None = "default",
        split: str = "test",
        text_field: str = "text",
    ) -> None:
        self.path, self.dataset, self.dataset_config, self.split, self.text_field = (
            path,
            dataset,
            dataset_config,
            split,
            text_field,
        )

    def records(self) -> Iterator[str]:
        rows = (
            read_jsonl(self.path)
            if self.path
            else load_hf_dataset(self.dataset, self.dataset_config, self.split, self.key)
        )
        for row in rows:
            yield row[self.text_field]

    def examples(self) -> Iterator[Completion]:
        return (split_last_word(text) for text in self.records())
