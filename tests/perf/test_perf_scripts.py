"""Each benchmark script runs at toy size (``--quick``) and prints its header and table.

These check structure, never speed: timings on a shared CPU say nothing. The scripts run
in this process (imports are the slow part); each restores what it changes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def _table_rows(out: str, first_column: str) -> list[list[str]]:
    """Rows of the markdown table whose header starts with ``first_column``."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_column}"))
    assert set(lines[start + 1]) <= set("|-"), "header separator"
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def _header_ok(out: str) -> None:
    assert re.search(r"^## ", out, re.M)
    assert "- machine: " in out and "torch threads" in out
    assert "- versions: python" in out and "torch " in out


def test_train_step_quick(capsys: pytest.CaptureFixture[str]) -> None:
    from perf import train_step

    res = train_step.main(["--quick"])
    out = capsys.readouterr().out
    _header_ok(out)
    rows = _table_rows(out, "model")
    assert [r[0] for r in rows] == ["ours", "transformers"]
    assert all(float(r[1].replace(",", "")) > 0 for r in rows)  # tokens/s
    assert "speed ours/transformers:" in out
    assert res["ratio"] > 0
    assert "first-step loss ours" in out  # same weights, checked


def test_train_step_peak_memory_subprocess() -> None:
    """The peak-memory child (skipped by --quick), for our model only (no transformers import)."""
    from perf import train_step
    from src.models import build_model

    args = train_step.parse_args(["--quick"])
    model = build_model(
        train_step.gpt2_config_dict(args.layers, args.d_model, args.heads, args.seq_len, args.vocab)
    )
    mem = train_step.measure_memory(args, model, who=("ours",))["ours"]
    assert mem["peak"] >= mem["rss_setup"] > mem["rss_imports"] > 0
    assert len(mem["step_s"]) == 2 and min(mem["step_s"]) > 0


@pytest.mark.slow
def test_train_step_memory_only_rows(capsys: pytest.CaptureFixture[str]) -> None:
    """--memory-only: one process per row, ours with the chunked loss (48-token chunks of the
    128 tokens), transformers, ours over the full logits."""
    from perf import train_step

    res = train_step.main(["--quick", "--memory-only", "--with-full-logits", "--loss-chunk", "48"])
    out = capsys.readouterr().out
    _header_ok(out)
    rows = _table_rows(out, "model")
    assert [r[0] for r in rows] == ["ours", "transformers", "ours-full-logits"]
    assert rows[1][2] == "1" and res["memory_ratio"] > 0
    assert "chunks of 48 tokens" in out and "peak memory ours/transformers:" in out


def test_generate_quick(capsys: pytest.CaptureFixture[str]) -> None:
    from perf import generate

    res = generate.main(["--quick"])
    out = capsys.readouterr().out
    _header_ok(out)
    rows = _table_rows(out, "decoder")
    assert [r[0] for r in rows] == ["ours, KV cache", "transformers generate", "ours, no cache"]
    assert res["same_tokens"], (
        "greedy decoding must agree: ours with/without cache and transformers"
    )
    assert "KV cache vs transformers generate:" in out and "KV cache vs no cache:" in out


def test_data_quick(capsys: pytest.CaptureFixture[str]) -> None:
    from perf import data

    res = data.main(["--quick"])
    out = capsys.readouterr().out
    _header_ok(out)
    rows = _table_rows(out, "stage")
    assert rows[0][0].startswith("tiktoken, 1 thread")
    assert [r[0] for r in rows[-2:]] == ["train loader (batches)", "training step (consumes)"]
    assert res["loader_ratio"] > 0 and "loader vs training consumption:" in out


def test_eval_quick(capsys: pytest.CaptureFixture[str]) -> None:
    from perf import eval as eval_bench

    res = eval_bench.main(["--quick"])
    out = capsys.readouterr().out
    _header_ok(out)
    rows = _table_rows(out, "task")
    assert [r[0] for r in rows] == ["LAMBADA", "HellaSwag"]
    assert all(r["max_abs_diff"] < 1e-2 for r in res.values())  # same scores as the peer


def test_framework_overhead_quick(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from perf import framework_overhead

    monkeypatch.setenv("TRANSFORMER_LAB_CACHE", str(tmp_path))
    res = framework_overhead.main(["--quick", "--profile", "toy", "--profile-rows", "200"])
    out = capsys.readouterr().out
    _header_ok(out)
    rows = _table_rows(out, "model")
    # overhead (wall), overhead (CPU), CPU ms/step
    assert rows[0][0] == "toy" and rows[0][-2].endswith("%")
    assert res["toy"]["framework_s"] > 0 and res["toy"]["bare_s"] > 0
    # the profile covers the framework's steady-state steps: our training_step once per step
    prof = {(r[0], r[1].rsplit(":", 1)[0]): r for r in _table_rows(out, "function")}
    assert prof[("training_step", "src/objectives/base.py")][2] == "1"  # calls per step
    assert res["profile"]["framework_s"] > 0 and res["profile"]["bare_s"] > 0


def test_gpu_check_cpu_smoke(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from perf import gpu_check

    rep = gpu_check.main(
        ["--cpu-smoke", "--no-compile", "--json", str(tmp_path / "gpu_check.json")]
    )
    out = capsys.readouterr().out
    assert rep["flash"]["model_flash_only"]["ok"], (
        "our causal path must run with only the flash SDPA kernel"
    )
    assert all("error" not in r for r in rep["train"].values())
    assert "| variant | tokens/s | MFU | peak memory GiB |" in out
    assert (tmp_path / "gpu_check.json").exists()
    top = rep["train"]["eager"]["profile"]  # --no-compile: the eager variant is profiled
    assert (
        top
        and all(r["ms_per_step"] > 0 for r in top)
        and "### Where a step's time goes: eager" in out
    )


def test_gpu_check_sh_is_valid_bash() -> None:
    subprocess.run(["bash", "-n", str(REPO_ROOT / "perf" / "gpu_check.sh")], check=True)


@pytest.mark.slow
def test_gpu_check_sh_without_a_gpu_says_so(tmp_path: Path) -> None:
    """No CUDA device and no --cpu-smoke: exit 3 with one clear line, nothing measured."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible")
    r = subprocess.run(
        ["bash", str(REPO_ROOT / "perf" / "gpu_check.sh")],
        capture_output=True,
        text=True,
        env={**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable},
        timeout=300,
    )
    assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-2000:]
    assert "gpu_check: no CUDA device visible to torch: nothing measured" in r.stdout
    assert "== 1/2" not in r.stdout and not (tmp_path / "gpu_check.json").exists()


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("RUN_GPU_CHECK_SMOKE"), reason="set RUN_GPU_CHECK_SMOKE=1 (about a minute)"
)
def test_gpu_check_sh_cpu_smoke(tmp_path: Path) -> None:
    """The whole script at toy size on CPU: compile (aot_eager) and a bf16-mixed Lightning fit."""
    r = subprocess.run(
        ["bash", str(REPO_ROOT / "perf" / "gpu_check.sh"), "--cpu-smoke"],
        capture_output=True,
        text=True,
        env={**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable},
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "fit: status completed" in r.stdout


def test_token_check_quick(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from perf import token_check

    res = token_check.main(["--quick", "--dir", str(tmp_path)])
    out = capsys.readouterr().out
    _header_ok(out)
    rows = _table_rows(out, "subject")
    assert [r[0] for r in rows] == ["check (warm)", "read (warm)", "check (cold)", "read (cold)"]
    assert all(float(r[1]) > 0 for r in rows)  # seconds
    assert "check/read (cold):" in out and res["ratio"] > 0


def test_scaling_quick(capsys: pytest.CaptureFixture[str]) -> None:
    from perf import scaling

    res = scaling.main(["--quick"])
    out = capsys.readouterr().out
    _header_ok(out)
    assert [r["T"] for r in res["seq"]] == [32, 64] and [r["d"] for r in res["width"]] == [32, 64]
    assert all(r["B"] * r["T"] == 128 for r in res["seq"])  # a constant number of tokens per step
    assert all(v > 0 for r in res["seq"] + res["width"] for v in r["tps"].values())
    assert all(r["flops"] > 0 for r in res["seq"])
    assert [r[0] for r in _table_rows(out, "context")] == ["16", "48"]
    assert all(r["same"] for r in res["decode"]), (
        "greedy decoding must agree with transformers at every context"
    )
    assert "decode: speed ours/transformers" in out


def test_nanogpt_side_by_side_skips_cleanly_without_nanogpt(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from perf import nanogpt_side_by_side

    res = nanogpt_side_by_side.main(["--anchor", str(tmp_path / "no-nanogpt")])
    assert "train.py is not at" in res["skipped"]
    assert capsys.readouterr().out.startswith("nanogpt_side_by_side: skipped:")


@pytest.mark.slow
def test_nanogpt_side_by_side_quick(capsys: pytest.CaptureFixture[str]) -> None:
    """Both runs, 20 iterations each (about a minute): nanoGPT's own train.py from its files and
    ours, each evaluated, timed and compared."""
    from perf import nanogpt_side_by_side

    reason = nanogpt_side_by_side.skip_reason(nanogpt_side_by_side.parse_args(["--quick"]))
    if reason:
        pytest.skip(reason)
    res = nanogpt_side_by_side.main(["--quick"])
    out = capsys.readouterr().out
    (pair,) = res["pairs"]
    # evaluations at steps 10 and 20
    assert len(pair["nanoGPT"].evals) >= 2 and len(pair["ours"].evals) >= 2
    assert [s for _, s, _ in pair["ours"].evals] == [10, 20]
    # character-level losses
    assert all(0 < v < 5 for who in pair.values() for _, _, v in who.evals)
    assert res["ratio"] > 0 and "time to nanoGPT's loss" in out
    assert [r[1] for r in _table_rows(out, "pair")] == ["nanoGPT", "ours"]


def test_nanogpt_side_by_side_runs_the_experiment_ours_names(tmp_path: Path) -> None:
    """``--ours experiment=<name>`` replaces nanoGPT's recipe on our side (named once, no
    horizon overrides of the other recipe) and sets that experiment's target ratio."""
    from perf import nanogpt_side_by_side as sbs

    default = sbs.parse_args([])
    ours = sbs.commands(default, tmp_path, 0)["ours"]
    assert "experiment=shakespeare_char" in ours and default.target_ratio == 0.8

    args = sbs.parse_args(
        ["--ours", "experiment=shakespeare_char_speedrun compile=false", "--max-iters", "1000"]
    )
    cmds = sbs.commands(args, tmp_path, 0)
    assert [c for c in cmds["ours"] if c.startswith("experiment=")] == [
        "experiment=shakespeare_char_speedrun"
    ]
    # its steps are its own
    assert "compile=false" in cmds["ours"] and not any(
        c.startswith(("scheduler.decay_steps", "trainer.max_steps")) for c in cmds["ours"]
    )
    assert "--max_iters=1000" in cmds["nanoGPT"] and args.target_ratio == 0.5

    quick = sbs.commands(
        sbs.parse_args(["--quick", "--ours", "experiment=shakespeare_char_speedrun"]), tmp_path, 0
    )
    assert "trainer.max_steps=20" in quick["ours"] and "~callbacks.sample_text" not in quick["ours"]

    with pytest.raises(SystemExit, match="experiment= 2 times"):
        sbs.parse_args(
            ["--ours", "experiment=shakespeare_char experiment=shakespeare_char_speedrun"]
        )
    assert (
        sbs.parse_args(["--ours", "experiment=quickstart", "--target-ratio", "0.9"]).target_ratio
        == 0.9
    )
    # argparse: no default target for an experiment it does not know
    with pytest.raises(SystemExit):
        sbs.parse_args(["--ours", "experiment=quickstart"])


def test_cli_latency_quick(capsys: pytest.CaptureFixture[str]) -> None:
    from perf import cli_latency

    res = cli_latency.main(["--quick"])
    out = capsys.readouterr().out
    _header_ok(out)
    # each checked: rc 1, one line with its did-you-mean
    assert set(res) == {
        "misspelt key",
        "wrong group value",
        *(f"misspelt key, src.{e}" for e in ("eval", "generate", "prepare", "inspect")),
    }
    assert all(ratio > 0 for ratio in res.values())


@pytest.mark.slow
def test_job_fixed_cost_quick(capsys: pytest.CaptureFixture[str]) -> None:
    """One 2-step synthetic job in a fresh process: every phase stamped, the phases add up."""
    from perf import job_fixed_cost

    res = job_fixed_cost.main(["--quick"])
    out = capsys.readouterr().out
    _header_ok(out)
    rows = _table_rows(out, "phase")
    assert rows[0][0].startswith("start → trainer built") and rows[-1][0].startswith(
        "jobs per hour"
    )
    assert 'python -c "import lightning"' in out and "per-job fixed cost:" in out
    phases = res["phases"]
    assert all(v >= 0 for v in phases.values())
    parts = sum(v for k, v in phases.items() if k != "whole job")
    assert abs(parts - phases["whole job"]) < 1e-6
    assert 0 < res["fixed_s"] < phases["whole job"]


def test_mup_transfer_quick(capsys: pytest.CaptureFixture[str]) -> None:
    """Both parametrizations at both toy widths and rates: a finite loss each, a best rate per
    width, and the shift between the widths printed."""
    from perf import mup_transfer

    res = mup_transfer.main(["--quick"])
    out = capsys.readouterr().out
    _header_ok(out)
    assert len(res["loss"]) == 2 * 2 * 2  # sp/mup × widths 32, 64 × 2 rates
    assert all(v < 100 for v in res["loss"].values())
    assert set(res["best"]) == {(n, w) for n in ("sp", "mup") for w in (32, 64)}
    assert set(res["shift"]) == {"sp", "mup"}
    assert "best rate per width" in out
