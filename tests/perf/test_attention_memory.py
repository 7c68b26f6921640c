"""``perf/attention_memory.py --quick``: the table of peak memory against T, with its slopes (its
structure, not its numbers: toy sizes on a shared CPU)."""

from __future__ import annotations

import pytest

from perf import attention_memory


@pytest.mark.slow  # four fresh subprocesses: about a minute
def test_quick_prints_the_table_and_slopes(capsys: pytest.CaptureFixture[str]) -> None:
    attention_memory.main(["--quick", "--threads", "1"])
    out = capsys.readouterr().out
    assert out.startswith("## Sliding-window attention: peak memory against T")
    assert "- machine: " in out and "- peak memory: " in out
    lines = [line for line in out.splitlines() if line.startswith("|")]
    assert lines[0].split("|")[1].strip() == "T"
    assert "flex_eager MiB" in lines[0] and "sdpa_mask MiB" in lines[0]
    rows = {line.split("|")[1].strip(): line for line in lines[2:]}
    assert set(rows) == {"256", "512", "slope"}
    slopes = [c.strip() for c in rows["slope"].split("|")[2:4]]
    assert all(float(s) > 0 for s in slopes)  # both grow with T at toy sizes


def test_slope_is_the_exponent() -> None:
    assert attention_memory.slope([(1, 3.0), (2, 12.0), (4, 48.0)]) == pytest.approx(2.0)
    assert attention_memory.slope([(1, 3.0)]) is None
