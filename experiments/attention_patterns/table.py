"""The demonstration tables of docs/attention.md, computed from the committed runs.

    python experiments/attention_patterns/table.py            # prints both tables (markdown)

docs/attention.md holds each table between ``<!-- demo:copy -->`` / ``<!-- demo:text -->`` markers;
tests/test_attention_demo.py checks that those blocks equal what this prints, so the numbers in the
docs are the runs' numbers.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs"
STUDY2_TEXT = HERE.parent / "02_positions" / "runs" / "text_cpu"
COPY_DISTANCE = 16  # copy of 16 symbols: the answer's i-th token is read from 16 positions back
FACTORS = (1, 2, 4, 8)


def _overrides(run: Path) -> dict[str, str]:
    """The job's command-line overrides, ``key=value`` -> {key: value}."""
    lines = yaml.safe_load((run / ".hydra" / "overrides.yaml").read_text())
    return dict(line.lstrip("+").split("=", 1) for line in lines)


def _runs(folder: str) -> list[tuple[dict[str, str], dict]]:
    """(overrides, metrics.json) of every finished job under runs/<folder>*."""
    out = []
    for metrics in sorted(RUNS.glob(f"{folder}*/*/metrics.json")):
        out.append((_overrides(metrics.parent), json.loads(metrics.read_text())))
    return out


def _fmt(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def copy_table() -> str:
    """Exact match on copy by depth and window, with the layers' combined reach L·(W − 1)."""
    rows = []
    for o, m in _runs("copy_depth"):
        depth, window = int(o["model.n_layer"]), int(o["model.mask.window"])
        rows.append((depth, window, m))
    lines = [
        "| layers | window | reach L·(W−1) | reach ≥ 16 | exact match 1× | 2× | 4× | test loss |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for depth, window, m in sorted(rows, key=lambda r: (r[0], r[1])):
        reach = depth * (window - 1)
        lines.append(
            f"| {depth} | {window} | {reach} | {'yes' if reach >= COPY_DISTANCE else 'no'} | "
            f"{_fmt(m.get('test/exact_match@16'))} | {_fmt(m.get('test/exact_match@32'))} | "
            f"{_fmt(m.get('test/exact_match@64'))} | {_fmt(m.get('test/loss'), 3)} |"
        )
    return "\n".join(lines)


def _ppl(m: dict) -> list[float | None]:
    return [m.get(f"extrapolation/ppl@{f}x") for f in FACTORS]


def text_table() -> str:
    """Test perplexity at 1×–8× the training length (64): sliding windows (seed 1) beside study 2's
    causal RoPE at its tuned rate (seed 1, and the mean of seeds 1–5)."""
    lines = [
        "| model (RoPE, lr 1e-2) | seed | " + " | ".join(f"ppl @{f}×" for f in FACTORS) + " |",
        "|---|---|" + "---|" * len(FACTORS),
    ]
    causal = {}
    for run in sorted(
        STUDY2_TEXT.glob("model.position=rope,optim.lr=0.01,protocol.stage=confirm,*")
    ):
        seed = int(run.name.rsplit("seed=", 1)[1])
        causal[seed] = _ppl(json.loads((run / "metrics.json").read_text()))
    if 1 in causal:
        lines.append("| causal (study 2) | 1 | " + " | ".join(_fmt(x) for x in causal[1]) + " |")
    if causal:
        means = [statistics.fmean(v[i] for v in causal.values()) for i in range(len(FACTORS))]
        seeds = f"{min(causal)}–{max(causal)} (mean)"
        lines.append(f"| causal (study 2) | {seeds} | " + " | ".join(_fmt(x) for x in means) + " |")
    windows = sorted(_runs("text"), key=lambda r: int(r[0]["model.mask.window"]))
    for o, m in windows:
        w = o["model.mask.window"]
        lines.append(
            f"| sliding window {w} | {o['seed']} | " + " | ".join(_fmt(x) for x in _ppl(m)) + " |"
        )
    return "\n".join(lines)


TABLES = {"copy": copy_table, "text": text_table}


if __name__ == "__main__":
    for name, make in TABLES.items():
        print(f"<!-- demo:{name} -->\n{make()}\n<!-- /demo:{name} -->\n")
