"""``perf/mixer_cost.py`` at its smallest point (``--quick``), as tests/perf/test_perf_scripts.py
runs the other scripts: structure, never speed. Plus its parameter matching at the default size,
one peak-memory subprocess, and the slope and crossover arithmetic on made-up curves."""

from __future__ import annotations

import pytest

from perf import mixer_cost
from tests.perf.test_perf_scripts import _header_ok, _table_rows


def test_quick_run_prints_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    res = mixer_cost.main(["--quick"])
    out = capsys.readouterr().out
    _header_ok(out)
    rows = _table_rows(out, "T")
    assert [r[0] for r in rows] == ["64", "128"]
    assert all(float(v.replace(",", "")) > 0 for r in rows for v in r[1:])  # ms per step
    summary = _table_rows(out, "mixer")
    assert [r[0] for r in summary] == list(mixer_cost.MIXERS)
    assert "Peak memory" not in out  # --quick skips the subprocesses
    assert set(res["times"]) == set(mixer_cost.MIXERS)


def test_default_sizes_have_equal_parameters() -> None:
    """d_ff solved per mixer: every model within 1% of attention's count."""
    from src.models.matching import count_parameters

    args = mixer_cost.parse_args([])
    counts = {m: count_parameters(c) for m, c in mixer_cost.matched_models(args).items()}
    assert list(counts) == list(mixer_cost.MIXERS)
    ref = counts["attention"]
    assert all(abs(n - ref) / ref < 0.01 for n in counts.values()), counts


def test_peak_memory_subprocess_grows_with_t() -> None:
    args = mixer_cost.parse_args(["--quick"])
    peaks = mixer_cost.measure_memory(args, "linear_attention", [64, 512])
    # the mark is read against the RSS at its reset, so never negative; T = 64's step may fit in
    # freed pages (0), T = 512's may not
    assert set(peaks) == {64, 512} and peaks[512] > peaks[64] >= 0


def test_slope_and_crossover_on_made_up_curves() -> None:
    ts = [256, 512, 1024, 2048]
    attn = {t: 1e-6 * t**2 for t in ts}  # quadratic
    lin = {t: 1e-3 * t for t in ts}  # linear: equal at T = 1000
    assert mixer_cost.slope(sorted(attn.items())) == pytest.approx(2.0)
    assert mixer_cost.slope(sorted(lin.items())) == pytest.approx(1.0)
    assert mixer_cost.crossover(attn, lin).startswith("≈ 1,000 (between 512 and 1024)")
    assert mixer_cost.crossover(attn, {t: 1e-9 * t for t in ts}).startswith("< 256")
    late = {t: 1e-2 * t for t in ts}  # equal at T = 10,000: past the grid, extrapolated
    assert mixer_cost.crossover(attn, late) == "> 2048 (extrapolated ≈ 10,000)"


def test_mixers_must_start_with_attention() -> None:
    with pytest.raises(SystemExit):
        mixer_cost.parse_args(["--mixers", "mamba2,attention"])
