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
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def _header_ok(out: str) -> None:
    assert re.search(r"^## ", out, re.M)
    assert "- machine: " in out and "torch threads" in out
    assert "- versions: python" in out and "torch " in out


def test_train_step_quick(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import train_step

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
    from benchmarks import train_step
    from src.models import build_model

    args = train_step.parse_args(["--quick"])
    model = build_model(train_step.gpt2_config_dict(args.layers, args.d_model, args.heads, args.seq_len, args.vocab))
    mem = train_step.measure_memory(args, model, who=("ours",))["ours"]
    assert mem["peak"] >= mem["rss_setup"] > mem["rss_imports"] > 0


def test_generate_quick(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import generate

    res = generate.main(["--quick"])
    out = capsys.readouterr().out
    _header_ok(out)
    rows = _table_rows(out, "decoder")
    assert [r[0] for r in rows] == ["ours, KV cache", "transformers generate", "ours, no cache"]
    assert res["same_tokens"], "greedy decoding must agree: ours with/without cache and transformers"
    assert "KV cache vs transformers generate:" in out and "KV cache vs no cache:" in out


def test_data_quick(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import data

    res = data.main(["--quick"])
    out = capsys.readouterr().out
    _header_ok(out)
    rows = _table_rows(out, "stage")
    assert rows[0][0].startswith("tiktoken, 1 thread")
    assert [r[0] for r in rows[-2:]] == ["train loader (batches)", "training step (consumes)"]
    assert res["loader_ratio"] > 0 and "loader vs training consumption:" in out


def test_eval_quick(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import eval as eval_bench

    res = eval_bench.main(["--quick"])
    out = capsys.readouterr().out
    _header_ok(out)
    rows = _table_rows(out, "task")
    assert [r[0] for r in rows] == ["LAMBADA", "HellaSwag"]
    assert all(r["max_abs_diff"] < 1e-2 for r in res.values())  # same scores as the peer


def test_framework_overhead_quick(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import framework_overhead

    monkeypatch.setenv("TRANSFORMER_LAB_CACHE", str(tmp_path))
    res = framework_overhead.main(["--quick"])
    out = capsys.readouterr().out
    _header_ok(out)
    rows = _table_rows(out, "model")
    assert rows[0][0] == "toy" and rows[0][-2].endswith("%")  # overhead (wall), overhead (CPU), CPU ms/step
    assert res["toy"]["framework_s"] > 0 and res["toy"]["bare_s"] > 0


def test_gpu_check_cpu_smoke(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from benchmarks import gpu_check

    rep = gpu_check.main(["--cpu-smoke", "--no-compile", "--json", str(tmp_path / "gpu_check.json")])
    out = capsys.readouterr().out
    assert rep["flash"]["model_flash_only"]["ok"], "our causal path must run with only the flash SDPA kernel"
    assert all("error" not in r for r in rep["train"].values())
    assert "| variant | tokens/s | MFU | peak memory GiB |" in out
    assert (tmp_path / "gpu_check.json").exists()


def test_gpu_check_sh_is_valid_bash() -> None:
    subprocess.run(["bash", "-n", str(REPO_ROOT / "benchmarks" / "gpu_check.sh")], check=True)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("RUN_GPU_CHECK_SMOKE"), reason="set RUN_GPU_CHECK_SMOKE=1 (about a minute)")
def test_gpu_check_sh_cpu_smoke(tmp_path: Path) -> None:
    """The whole script at toy size on CPU: compile (aot_eager) and a bf16-mixed Lightning fit."""
    r = subprocess.run(["bash", str(REPO_ROOT / "benchmarks" / "gpu_check.sh"), "--cpu-smoke"], capture_output=True,
                       text=True, env={**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "fit: status completed" in r.stdout


def test_token_check_quick(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from benchmarks import token_check

    res = token_check.main(["--quick", "--dir", str(tmp_path)])
    out = capsys.readouterr().out
    _header_ok(out)
    rows = _table_rows(out, "subject")
    assert [r[0] for r in rows] == ["check (warm)", "read (warm)", "check (cold)", "read (cold)"]
    assert all(float(r[1]) > 0 for r in rows)  # seconds
    assert "check/read (cold):" in out and res["ratio"] > 0
