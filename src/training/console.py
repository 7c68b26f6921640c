"""What a run prints: no third-party noise our setup triggers, and at the end where everything went.

``quiet_third_party`` removes lines Lightning prints on every run that are not about the run:
the advertisement for its cloud logger ("💡 Tip: … litlogger …"), its note that our own model
summary replaces its default one, and the deprecation warning its own ``_pytree`` helper raises
under recent torch (``isinstance(treespec, LeafSpec)``: Lightning's code, not ours; nothing a
user can act on). Each filter matches that one message only; every other warning and log line
stays.

``final_figures`` and ``run_outputs`` make the entry point's last lines: the final validation and
test losses with the weights and step they belong to, the run's tokens/s, and its files.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

from lightning.pytorch.utilities.rank_zero import rank_zero_only

from src.echo import echo
from src.jsonfile import METRICS, read_json

# Lightning's info lines that our setup triggers and that say nothing about the run
_DROPPED = (
    "💡 Tip:",  # the litlogger advertisement, on every Trainer
    # we add our own ModelSummary (src/callbacks/summary.py)
    "Trainer already configured with model summary callbacks",
)


class _DropTip(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_DROPPED)


def quiet_third_party() -> None:
    """Install the two filters (idempotent)."""
    lg = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    if not any(isinstance(f, _DropTip) for f in lg.filters):
        lg.addFilter(_DropTip())
    warnings.filterwarnings(
        "ignore",
        message=r"`isinstance\(treespec, LeafSpec\)` is deprecated",
        module=r"lightning\.pytorch\.utilities\._pytree",
    )


def run_outputs(
    run_dir: str | Path, metrics: dict[str, Any] | None = None
) -> list[tuple[str, Path]]:
    """(what, path) of what a training run left in ``run_dir``, in reading order."""
    d = Path(run_dir)
    out: list[tuple[str, Path]] = [("run directory", d)]
    if (d / "metrics.json").is_file():
        out.append(("metrics", d / "metrics.json"))
    for key, what in (("best_ckpt", "best checkpoint"), ("last_ckpt", "last checkpoint")):
        if metrics and metrics.get(key):
            out.append((what, Path(metrics[key])))
    for pattern, what in (
        ("csv/version_*/metrics.csv", "CSV log"),
        ("tensorboard/version_*", "TensorBoard"),
        ("wandb/offline-run-*", "W&B offline run"),
        ("wandb/run-*", "W&B run"),
        ("mlruns", "MLflow store"),
        ("samples*.txt", "samples"),
    ):
        found = sorted(d.glob(pattern))
        if found:
            out.append((what, found[-1]))
    return out


def format_outputs(items: list[tuple[str, Path]]) -> str:
    width = max(len(w) for w, _ in items)
    return "\n".join(f"{w + ':':<{width + 1}} {p}" for w, p in items)


def final_figures(metrics: dict[str, Any]) -> str:
    """``final: val/loss 2.1910 (step 400) · test/loss 2.1990 (final weights, step 400) · 10,496
    tokens/s`` from a run's metrics.json (what is missing is left out; a failed run says so)."""
    parts: list[str] = []
    val, best = metrics.get("val/loss"), metrics.get("val/loss_best")
    if isinstance(val, (int, float)):
        parts.append(
            f"val/loss {val:.4f}"
            + (
                f" (best {best:.4f} at step {metrics['best_step']})"
                if isinstance(best, (int, float))
                and metrics.get("best_step") is not None
                and abs(best - val) > 1e-12
                else ""
            )
        )
    test = metrics.get("test/loss")
    if isinstance(test, (int, float)):
        scored = metrics.get("scored_weights")
        parts.append(
            f"test/loss {test:.4f}"
            + (f" ({scored} weights, step {metrics.get('scored_step')})" if scored else "")
        )
    # a synthetic task's exact match at each test length: the loss at the training length alone
    # (often 0.0000) hides whether the model generalises past it
    lengths = sorted(
        (int(k.rsplit("@", 1)[1]), v)
        for k, v in metrics.items()
        if k.startswith("test/exact_match@") and k.rsplit("@", 1)[1].isdigit()
    )
    if lengths:
        parts.append(
            "exact match "
            + ", ".join(
                f"{v:.2f} at length {n}" if isinstance(v, (int, float)) else f"– at length {n}"
                for n, v in lengths
            )
        )
    rate = metrics.get("throughput_tokens_per_s")
    if isinstance(rate, (int, float)):
        parts.append(f"{rate:,.0f} tokens/s")
    if metrics.get("status") == "failed":
        parts.append(f"failed: {metrics.get('error')}")
    return "final: " + (" · ".join(parts) if parts else "no validation or test loss was computed")


@rank_zero_only
def say_where_results_went(run_dir: str, skipped: bool = False) -> None:
    """The last lines of a run (console and train.log): its final losses and tokens/s, then its
    directory, metrics.json, checkpoints and each logger's files."""
    metrics = read_json(Path(run_dir) / METRICS) or {}
    head = (
        "skipped by sweep_resume (done earlier with this config)"
        if skipped
        else f"{metrics.get('status', 'finished')}"
    )
    echo(
        f"\n{final_figures(metrics)}\nrun {head}; "
        f"outputs:\n{format_outputs(run_outputs(run_dir, metrics))}"
    )
