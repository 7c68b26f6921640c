"""The logger group: csv, tensorboard, wandb (offline), mlflow (file store), together in one run.

One 4-step run of ``python -m src.train logger=[csv,tensorboard,wandb,mlflow]`` (the combination
form Hydra allows for a config group); each test then reads its own logger's files back with
that logger's own reader and finds ``train/loss`` and ``val/loss`` at the steps they were logged.
"""

from __future__ import annotations

import csv
import json
import struct
from pathlib import Path
from typing import Any

import pytest

LOGGERS = ["csv", "tensorboard", "wandb", "mlflow"]
STEPS = 4  # trainer.max_steps in the tiny run; validation at steps 2 and 4


@pytest.fixture(scope="module")
def run(
    tmp_path_factory: pytest.TempPathFactory, tiny_run: tuple[str, ...], run_entry_point: Any
) -> tuple[Path, Any]:
    tmp = tmp_path_factory.mktemp("loggers")
    run_dir = tmp / "run"
    overrides = [
        o
        for o in tiny_run
        if not o.startswith("logger=") and o != "trainer.enable_model_summary=false"
    ]
    r = run_entry_point(
        "src.train",
        [*overrides, f"logger=[{','.join(LOGGERS)}]", f"hydra.run.dir={run_dir}"],
        cwd=tmp,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    # every logger wrote inside the run directory
    assert sorted(p.name for p in tmp.iterdir()) == ["run"]
    return run_dir, r


@pytest.fixture(scope="module")
def logged_run(run: tuple[Path, Any]) -> Path:
    return run[0]


NOISE = (
    "💡",
    "litlogger",
    "LeafSpec",
    "Total FLOPs: 0",
    "Trainer already configured with model summary",
)


def test_console_ends_with_where_results_went(run: tuple[Path, Any]) -> None:
    """No third-party tip or warning our setup triggers, our own FLOPs in the model summary, and
    the last lines name the run directory, metrics.json, checkpoints and each logger's files."""
    run_dir, r = run
    console = r.stdout + r.stderr
    for noise in NOISE:
        assert noise not in console, noise
    assert "Training FLOPs per token (forward + backward, T=32)" in console  # the model's own count
    lines = r.stdout.strip().splitlines()
    tail = lines[lines.index("run completed; outputs:") + 1 :]
    listed = {what: Path(path.strip()) for what, path in (line.split(":", 1) for line in tail)}
    assert listed["run directory"] == run_dir and listed["metrics"] == run_dir / "metrics.json"
    assert set(listed) == {
        "run directory",
        "metrics",
        "best checkpoint",
        "last checkpoint",
        "CSV log",
        "TensorBoard",
        "W&B offline run",
        "MLflow store",
    }
    assert all(p.exists() for p in listed.values())
    # the final losses and the run's one tokens/s figure, as metrics.json records them
    metrics = json.loads((run_dir / "metrics.json").read_text())
    final = lines[lines.index("run completed; outputs:") - 1]
    assert final.startswith("final: ") and f"val/loss {metrics['val/loss']:.4f}" in final
    assert (
        f"test/loss {metrics['test/loss']:.4f} ({metrics['scored_weights']} weights, step {STEPS})"
        in final
    )
    assert f"{metrics['throughput_tokens_per_s']:,.0f} tokens/s" in final


def test_train_log_holds_the_console_log(run: tuple[Path, Any]) -> None:
    """train.log has Lightning's lines, the model summary and the last lines, not just our log records."""
    run_dir, r = run
    log = (run_dir / "train.log").read_text()
    for line in (
        "GPU available: False",
        "`Trainer.fit` stopped: `max_steps=4` reached.",
        "Training FLOPs per token (forward + backward, T=32)",
        "final: val/loss",
        "run completed; outputs:",
        f"metrics:         {run_dir / 'metrics.json'}",
    ):
        assert line in log, line


def _check(steps: dict[str, dict[int, float]]) -> None:
    """train/loss at every step (log_every_n_steps=1), val/loss at each validation; finite values."""
    assert set(steps["train/loss"]) >= {1, 2, 3}, steps["train/loss"]
    assert set(steps["val/loss"]) >= {2, 4}, steps["val/loss"]
    for series in steps.values():
        assert all(0.0 < v < 20.0 for v in series.values())


def test_csv_logger(logged_run: Path) -> None:
    (path,) = logged_run.glob("csv/version_*/metrics.csv")
    with open(path) as f:
        rows = list(csv.DictReader(f))
    # Lightning's loggers count steps from 0 (the first optimizer step is logged at step 0)
    _check(
        {
            k: {int(r["step"]) + 1: float(r[k]) for r in rows if r.get(k)}
            for k in ("train/loss", "val/loss")
        }
    )


def test_tensorboard_logger(logged_run: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (version,) = logged_run.glob("tensorboard/version_*")
    acc = EventAccumulator(str(version))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert {"train/loss", "val/loss"} <= set(tags), tags
    _check({k: {e.step + 1: e.value for e in acc.Scalars(k)} for k in ("train/loss", "val/loss")})


def test_mlflow_logger(logged_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    # reading a file store too (src/training/loggers.py)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")

    client = MlflowClient(tracking_uri=f"file:{logged_run / 'mlruns'}")
    (experiment,) = [e for e in client.search_experiments() if e.name == "transformer-lab"]
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    _check(
        {
            k: {m.step + 1: m.value for m in client.get_metric_history(run.info.run_id, k)}
            for k in ("train/loss", "val/loss")
        }
    )
    assert run.data.params["cfg/model/n_layer"] == "2"  # the task's hyperparameters went with it


def _wandb_records(run_file: Path) -> list[Any]:
    """Every record of an offline run's ``.wandb`` file, parsed with wandb's own protobuf ``Record``.

    wandb 0.2x+ ships no Python reader for the file; its layout is LevelDB's log format (what
    wandb's former ``sdk/internal/datastore.py`` read): a 7-byte header (``:W&B``, magic, version),
    then 32 KiB blocks of chunks, each ``crc32 u32, length u16, type u8`` + payload, a record
    split over blocks as FIRST(2)/MIDDLE(3)/LAST(4) chunks or held whole in a FULL(1) chunk.
    """
    from wandb.proto import wandb_internal_pb2

    data, block, header = run_file.read_bytes(), 32768, 7
    assert data[:4] == b":W&B", data[:8]
    records, pos, buf = [], header, b""
    while pos + header <= len(data):
        # a block's tail too short for a chunk header is zero padding
        if block - pos % block < header:
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + header])
        pos += header
        buf += data[pos : pos + length]
        pos += length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(buf)
            records.append(record)
            buf = b""
    return records


def test_wandb_logger_offline(logged_run: Path) -> None:
    (offline,) = logged_run.glob("wandb/offline-run-*")  # offline: nothing was sent anywhere
    (run_file,) = offline.glob("run-*.wandb")
    records = _wandb_records(run_file)
    rows = [
        {
            item.key or "/".join(item.nested_key): json.loads(item.value_json)
            for item in r.history.item
        }
        for r in records
        if r.WhichOneof("record_type") == "history"
    ]
    steps = {
        k: {int(r["trainer/global_step"]) + 1: float(r[k]) for r in rows if k in r}
        for k in ("train/loss", "val/loss")
    }
    _check(steps)
    exits = [r.exit for r in records if r.WhichOneof("record_type") == "exit"]
    # the run was finished (src.training.loggers.close_loggers)
    assert [e.exit_code for e in exits] == [0]
