"""Issue 21 item 14: a YAML alias bomb in a user's experiment config used to hang ``src.train`` with no output
until memory ran out (OmegaConf copies every alias); now it is one line naming the file and the key, before
Hydra loads anything (``src.config.yaml_limits``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from src.config.yaml_limits import CONF, check_yaml_file, named_files
from src.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
BOMB = "# @package _global_\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi")
)


def test_the_bomb_is_one_line_before_hydra_loads_it(tmp_path: Path) -> None:
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "bomb.yaml").write_text(BOMB)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "src.train",
            "--config-dir",
            str(tmp_path),
            "experiment=bomb",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HYDRA_FULL_ERROR": "0"},
    )
    assert r.returncode == 1, r.stderr[-2000:]
    line = r.stderr.strip().splitlines()[-1]
    assert (
        str(tmp_path / "experiment" / "bomb.yaml") in line
        and "key 'g'" in line
        and "aliases" in line
    )
    assert not (tmp_path / "run").exists()


def test_a_recursive_alias_is_named(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("a: &a [1, *a]\n")
    with pytest.raises(ConfigError) as info:
        check_yaml_file(path)
    assert str(path) in str(info.value) and "key 'a'" in str(info.value)


def test_every_committed_config_is_far_below_the_limit() -> None:
    for path in sorted(CONF.rglob("*.yaml")):
        check_yaml_file(path, limit=100_000)


def test_the_files_a_command_line_names(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("a: 1\n")
    found = list(
        named_files(
            ["model=tiny", "+experiment=quickstart", "-cd", str(tmp_path), "trainer.max_steps=5"]
        )
    )
    assert (
        CONF / "model" / "tiny.yaml" in found and CONF / "experiment" / "quickstart.yaml" in found
    )
    assert tmp_path / "x.yaml" in found


def test_the_study_and_eval_entry_points_check_too(tmp_path: Path) -> None:
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "bomb.yaml").write_text(BOMB)
    for module in ("src.study", "src.eval"):
        args = [f"hydra.searchpath=[file://{tmp_path}]", "experiment=bomb"] + (
            ["--dry-run"] if module == "src.study" else []
        )
        r = subprocess.run(
            [sys.executable, "-m", module, *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "HYDRA_FULL_ERROR": "0"},
        )
        assert r.returncode == 1, (module, r.stderr[-2000:])
        assert str(tmp_path / "experiment" / "bomb.yaml") in r.stderr.strip().splitlines()[-1], (
            module
        )
