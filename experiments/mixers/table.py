"""The demonstration tables of docs/mixers.md, computed from the committed runs.

    python experiments/mixers/table.py            # prints both tables (markdown)

docs/mixers.md holds each table between ``<!-- demo:exact -->`` / ``<!-- demo:tokens -->``
markers; tests/test_mixer_demo.py checks that those blocks equal what this prints, so the numbers
in the docs are the runs' numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs"
MIXERS = ("attention", "linear_attention", "short_conv", "mamba2", "gated_deltanet")
TASKS = ("mqar", "induction", "selective_copy")


def _load(path: Path) -> dict | None:
    if not path.is_file():
        return None
    m = json.loads(path.read_text())
    return m if m.get("status") == "completed" else None


def runs(task: str, mixer: str) -> dict[str, dict]:
    """{rate: metrics.json} of the finished jobs of one mixer on one task: runs/<task>/<mixer>
    (lr 3e-3) and runs/<task>/<mixer>@lr1e-3 (the retry where 3e-3 left val exact match < 0.5)."""
    found = {
        "3e-3": _load(RUNS / task / mixer / "metrics.json"),
        "1e-3": _load(RUNS / task / f"{mixer}@lr1e-3" / "metrics.json"),
    }
    return {lr: m for lr, m in found.items() if m is not None}


def chosen(task: str, mixer: str) -> tuple[str, dict] | None:
    """The rate of lower validation loss, and its metrics (None: no finished job)."""
    done = runs(task, mixer)
    if not done:
        return None
    return min(done.items(), key=lambda kv: kv[1]["val/loss"])


def by_length(m: dict, metric: str) -> list[float]:
    """``test/<metric>@<size>`` at the three test sizes, shortest first (1×, 2×, 4×)."""
    sizes = sorted(int(k.rsplit("@", 1)[1]) for k in m if k.startswith(f"test/{metric}@"))
    return [m[f"test/{metric}@{s}"] for s in sizes]


def _table(metric: str) -> str:
    head = "| mixer | " + " | ".join(f"{t} 1× | 2× | 4×" for t in TASKS) + " |"
    lines = [head, "|---|" + "---|" * (3 * len(TASKS))]
    for mixer in MIXERS:
        cells = []
        for task in TASKS:
            pick = chosen(task, mixer)
            if pick is None:
                cells += ["not run"] * 3
                continue
            mark = "" if pick[0] == "3e-3" else " †"
            cells += [f"{x:.2f}{mark}" for x in by_length(pick[1], metric)]
        lines.append(f"| {mixer} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def exact_table() -> str:
    """Greedy exact match of the whole answer (256 test examples per size); † = at lr 1e-3."""
    return _table("exact_match")


def tokens_table() -> str:
    """Answer-token accuracy: what part of the answer is right when the whole is not."""
    return _table("token_acc")


TABLES = {"exact": exact_table, "tokens": tokens_table}

if __name__ == "__main__":
    for name, make in TABLES.items():
        print(f"<!-- demo:{name} -->\n{make()}\n<!-- /demo:{name} -->\n")
