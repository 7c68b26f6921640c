"""A real sweep end to end: ``python -m src.train -m`` (2 FFN variants x 2 seeds, tiny size,
a handful of steps), killed part-way and run again (only the missing jobs run), then
``src.report`` — whose table is checked against the runs' own metrics files.

The sweep also exercises match_params (SwiGLU solved to the GELU count), the per-layer
gradient-norm and length-extrapolation callbacks, and the deterministic job directories.
"""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from src.report import make_report
from src.reporting.stats import paired_t_test

REPO = Path(__file__).resolve().parents[2]
LIMIT_S = 240  # per sweep invocation (the machine may be shared)


def sweep_command(sweep_dir: Path, cache: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "src.train",
        "-m",
        "experiment=study_common",
        "model=tiny",
        "tokenizer=char",
        "data=embedded",
        f"data.cache_dir={cache}",
        "data.max_val_windows=8",
        "model.n_layer=2",
        "model.d_model=32",
        "model.n_head=2",
        "model.d_ff=64",
        "block_size=16",
        "model.max_seq_len=16",
        "batch_size=4",
        "trainer.max_steps=6",
        "trainer.val_check_interval=3",
        "trainer.limit_val_batches=2",
        "trainer.limit_test_batches=2",
        "scheduler.warmup_steps=2",
        "match_params.reference={ffn:{name:gelu}}",
        "+callbacks.grad_norms._target_=src.callbacks.layer_grad_norms.LayerGradNorms",
        "+callbacks.grad_norms.output_dir=${paths.output_dir}",
        "+callbacks.extrapolation._target_=src.callbacks.length_extrapolation.LengthExtrapolation",
        "+callbacks.extrapolation.factors=[1,2]",
        "+callbacks.extrapolation.output_dir=${paths.output_dir}",
        "~callbacks.throughput",
        "~callbacks.lr_monitor",
        "~callbacks.model_checkpoint",
        "model/ffn=gelu,swiglu",
        "seed=1,2",
        f"hydra.sweep.dir={sweep_dir}",
    ]


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "MPLBACKEND": "Agg",
    }


def job_dirs(sweep: Path) -> list[Path]:
    return sorted(
        p.parent.parent for p in sweep.rglob(".hydra/overrides.yaml") if "attempts" not in p.parts
    )


def completed(sweep: Path) -> dict[Path, bytes]:
    out = {}
    for d in job_dirs(sweep):
        m = d / "metrics.json"
        if m.is_file() and json.loads(m.read_text()).get("status") == "completed":
            out[d] = m.read_bytes()
    return out


def overrides(d: Path) -> dict[str, str]:
    return dict(
        o.lstrip("+").split("=", 1)
        for o in yaml.safe_load((d / ".hydra" / "overrides.yaml").read_text())
    )


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("sweep")
    sweep_dir, cache = root / "multirun", root / "cache"
    cmd = sweep_command(sweep_dir, cache)
    log1 = (root / "first.log").open("w")
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=_env(), stdout=log1, stderr=subprocess.STDOUT, start_new_session=True
    )
    deadline = time.monotonic() + LIMIT_S
    try:  # interrupt once two jobs finished and a third has started (or whatever comes first after two)
        while time.monotonic() < deadline and proc.poll() is None:
            done = completed(sweep_dir)
            if len(done) >= 2 and len(job_dirs(sweep_dir)) > len(done):
                break
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log1.close()
    before = completed(sweep_dir)
    assert 2 <= len(before) < 4, (root / "first.log").read_text()[-3000:]
    mtimes = {d: (d / "metrics.json").stat().st_mtime_ns for d in before}
    rerun = subprocess.run(
        cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=LIMIT_S
    )
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    return {
        "dir": sweep_dir,
        "before": before,
        "mtimes": mtimes,
        "rerun": rerun.stdout + rerun.stderr,
        "root": root,
    }


def test_rerun_completes_only_the_missing_jobs(sweep: dict) -> None:
    after = completed(sweep["dir"])
    assert len(after) == 4 and len(job_dirs(sweep["dir"])) == 4  # deterministic dirs: no duplicates
    for d, content in sweep["before"].items():  # finished jobs were not run again
        assert after[d] == content and (d / "metrics.json").stat().st_mtime_ns == sweep["mtimes"][d]
    # sweep_resume's "…; skipping" line
    assert sweep["rerun"].count("already completed (") == len(sweep["before"])
    restarted = [d for d in after if d not in sweep["before"]]
    assert len(restarted) == 4 - len(sweep["before"])
    # one fresh attempt each: a single CSV log, the killed attempt's files set aside
    for d in restarted:
        assert len(list(d.glob("csv/version_*"))) == 1
    names = {d.name for d in job_dirs(sweep["dir"])}  # directory = the job's overrides, "/" -> "."
    assert all("model.ffn=" in n or len(n) == 120 for n in names)


def test_report_table_matches_the_runs_metrics(sweep: dict) -> None:
    out = sweep["root"] / "report"
    report = make_report([sweep["dir"]], out)
    assert report.report.varying == ["model/ffn"]
    with (out / "report.csv").open() as f:
        table = {row["variant"]: row for row in csv.DictReader(f)}
    assert set(table) == {"model/ffn=gelu", "model/ffn=swiglu"}
    per_variant: dict[str, list[dict]] = {"gelu": [], "swiglu": []}
    # by seed: paired
    for d in sorted(job_dirs(sweep["dir"]), key=lambda d: str(overrides(d).get("seed"))):
        per_variant[overrides(d)["model/ffn"]].append(json.loads((d / "metrics.json").read_text()))
    for ffn, runs in per_variant.items():
        row = table[f"model/ffn={ffn}"]
        losses = [r["test/loss"] for r in runs]  # verdicts on the test split
        assert int(row["n_seeds"]) == 2
        assert float(row["mean"]) == pytest.approx(statistics.mean(losses), rel=1e-9)
        assert float(row["std"]) == pytest.approx(statistics.stdev(losses), rel=1e-9)
        assert all(r["tokens_seen"] == 6 * 4 * 16 for r in runs)
        # learned positions: 1x scored, 2x reported not applicable (null in metrics.json)
        assert all(
            r["extrapolation/ppl@1x"] > 0 and r["extrapolation/ppl@2x"] is None for r in runs
        )
        budget = json.loads(
            (
                next(d for d in job_dirs(sweep["dir"]) if overrides(d)["model/ffn"] == ffn)
                / "budget.json"
            ).read_text()
        )
        assert budget["params"] == runs[0]["params"] and budget["tokens_per_step"] == 4 * 16
    # matched sizes: SwiGLU solved to the GELU count, the report shows both
    gelu_params = per_variant["gelu"][0]["params"]
    assert abs(per_variant["swiglu"][0]["params"] - gelu_params) <= 0.01 * gelu_params
    # the test against seed noise: both variants ran the same seeds on the same batches, so the report's
    # p-value is the paired test's on the runs' own test losses
    t = paired_t_test(
        [r["test/loss"] for r in per_variant["swiglu"]],
        [r["test/loss"] for r in per_variant["gelu"]],
    )
    assert t is not None and float(table["model/ffn=swiglu"]["p"]) == pytest.approx(t.p, rel=1e-9)
    assert table["model/ffn=gelu"]["verdict"] == "baseline"
    assert table["model/ffn=swiglu"]["verdict"] in ("better", "worse", "equivalent", "inconclusive")
    md = report.markdown.read_text()
    assert (
        "paired t-test" in md and "Holm" in md and "n/a: learned position table has 16 rows" in md
    )
    for name in ("loss_vs_tokens.png", "extrapolation.png", "grad_norms.png"):
        assert (out / name).stat().st_size > 1000
    assert all(math.isfinite(float(table[f]["mean"])) for f in table)


def test_load_run_outside_a_multirun_has_job_number_zero(tmp_path: Path) -> None:
    """A single run's .hydra/hydra.yaml has job.num '???' (Hydra sets it only in multiruns)."""
    import json

    import yaml

    from src.studies.runs import load_runs

    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text(
        yaml.safe_dump({"seed": 1, "model": {"name": "tiny"}})
    )
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["experiment=quickstart"]))
    (run / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"job": {"num": "???"}}}))
    (run / "metrics.json").write_text(json.dumps({"status": "completed", "val/loss": 2.0}))
    (found,) = load_runs([tmp_path])
    assert found.job_num == 0 and found.metrics["val/loss"] == 2.0
