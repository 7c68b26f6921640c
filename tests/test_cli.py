"""Errors at the command line, as a user meets them: our own errors are one clear message and a
non-zero exit without a traceback (the traceback with HYDRA_FULL_ERROR=1: the wrapper's unit test),
an unexpected exception keeps its traceback, and an impossible run directory is refused before
anything runs.

The commands run at once in subprocesses (the imports are the slow part), each in its own cwd.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from src.cli import CommandError, clean_errors
from src.errors import ConfigError, Preempted
from tests.run_fixtures import procs, tiny, token_cache  # noqa: F401  (pytest fixtures)

REPO = Path(__file__).resolve().parents[1]
FAULTS = "+callbacks.faults._target_=tests.faults.FaultInjector"
#: the line our error prints: its type, then the message naming the key, the value and the fix
N_HEAD_5 = ("ConfigError: model.d_model=32", "model.n_head=5", "divisors of d_model")


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory,
    procs: SimpleNamespace,
    tiny: tuple[str, ...],
    token_cache: str,
) -> dict[str, SimpleNamespace]:
    """Every command started together; ``runs[name]`` -> (rc, out, tmp) once finished."""
    root = tmp_path_factory.mktemp("cli")
    (root / "a_file").write_text("not a directory")
    (root / "run_dir" / "checkpoints").mkdir(parents=True)
    (root / "run_dir" / "checkpoints" / "last.ckpt").write_bytes(b"")
    bad_head = [a for a in tiny if not a.startswith("model.n_head=")] + ["model.n_head=5"]
    commands: dict[str, tuple[str, list[str], dict[str, str]]] = {
        "ours": (
            "src.train",
            [*bad_head, f"hydra.run.dir={root / 'ours'}"],
            {"HYDRA_FULL_ERROR": "0"},
        ),
        "bug": (
            "src.train",
            [*tiny, FAULTS, f"hydra.run.dir={root / 'bug'}"],
            {
                "HYDRA_FULL_ERROR": "0",
                "TLAB_FAULTS": "raise_train_step=2",
                "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
            },
        ),  # tests.faults, from another cwd
        "sweep": (
            "src.train",
            [
                "-m",
                *[a for a in bad_head[:-1] if not a.startswith("trainer.max_steps=")],
                "model.n_head=5,4",
                "trainer.max_steps=2",
                f"hydra.sweep.dir={root / 'sweep'}",
            ],
            {"HYDRA_FULL_ERROR": "0"},
        ),
        "run_dir_proc": (
            "src.train",
            [*tiny, "hydra.run.dir=/proc/tlab-x"],
            {"HYDRA_FULL_ERROR": "0"},
        ),
        "run_dir_file": (
            "src.train",
            [*tiny, f"hydra.run.dir={root / 'a_file'}"],
            {"HYDRA_FULL_ERROR": "0"},
        ),
        "generate_temperature": (
            "src.generate",
            ["ckpt_path=/nonexistent.ckpt", "temperature=-1"],
            {"HYDRA_FULL_ERROR": "0"},
        ),
        "generate_ckpt_dir": (
            "src.generate",
            [f"ckpt_path={root / 'run_dir'}"],
            {"HYDRA_FULL_ERROR": "0"},
        ),
    }
    started = {}
    for name, (module, args, env) in commands.items():
        log = root / f"{name}.log"
        f = open(log, "wb")
        started[name] = (
            subprocess.Popen(
                [sys.executable, "-m", module, *args],
                cwd=root,
                stdout=f,
                stderr=subprocess.STDOUT,
                env=procs.env(**env),
            ),
            log,
        )
    out = {}
    for name, (proc, log) in started.items():
        try:
            rc = proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"{name} did not finish:\n{log.read_text()[-3000:]}")
        out[name] = SimpleNamespace(rc=rc, out=log.read_text(), root=root)
    return out


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _has_line(text: str, start: str, *parts: str) -> bool:
    """Some line of ``text`` starts with ``start`` and holds every one of ``parts``."""
    return any(line.startswith(start) and all(p in line for p in parts) for line in _lines(text))


def test_our_error_is_one_message_without_a_traceback(runs: dict[str, Any]) -> None:
    r = runs["ours"]
    assert r.rc == 1 and "Traceback" not in r.out, r.out[-3000:]
    assert _has_line(r.out, *N_HEAD_5), r.out[-3000:]
    assert (
        _lines(r.out)[-1]
        == "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace."
    )


def test_an_unexpected_exception_keeps_its_traceback(runs: dict[str, Any]) -> None:
    r = runs["bug"]
    assert r.rc == 1 and "Traceback (most recent call last)" in r.out
    assert "RuntimeError: injected fault after step 2 (TLAB_FAULTS=raise_train_step)" in r.out


def test_a_failed_sweep_job_is_one_message_and_the_others_run(runs: dict[str, Any]) -> None:
    r = runs["sweep"]
    assert r.rc == 1 and "Traceback" not in r.out and _has_line(r.out, *N_HEAD_5)
    assert (
        '"status": "completed"'
        in (r.root / "sweep" / "model.n_head=4" / "metrics.json").read_text()
    )


@pytest.mark.parametrize(
    ("name", "line"),
    [  # (how the line starts: the key and value, then what it holds: the fix)
        (
            "run_dir_proc",
            (
                "hydra.run.dir=/proc/tlab-x cannot be created",
                "No such file or directory",
                "give a directory you can write to",
            ),
        ),
        (
            "run_dir_file",
            (
                "hydra.run.dir={root}/a_file is an existing file",
                "give a directory",
                "hydra.run.dir={root}/a_file_run",
            ),
        ),
        ("generate_temperature", ("ConfigError: temperature=-1", "0 or more")),
        (
            "generate_ckpt_dir",
            (
                "CheckpointError: {root}/run_dir is a directory",
                "{root}/run_dir/checkpoints/last.ckpt",
                "trainer.strategy.state_dict_type=full",
            ),
        ),
    ],
)
def test_clear_errors_before_any_work(
    runs: dict[str, Any], name: str, line: tuple[str, ...]
) -> None:
    r = runs[name]
    assert r.rc == 1 and "Traceback" not in r.out, r.out[-3000:]
    assert _has_line(r.out, *(part.format(root=r.root) for part in line)), r.out[-3000:]


# ---------------------------------------------------------------- the wrapper itself


def _raise(error: BaseException) -> Callable[[], None]:
    def go() -> None:
        with clean_errors():
            raise error

    return go


def test_clean_errors_converts_only_ours(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    ours = ConfigError("batch_size=0 is invalid: a positive number")
    with pytest.raises(CommandError) as info:
        _raise(ours)()
    assert (
        str(info.value) == "ConfigError: batch_size=0 is invalid: a positive number"
        and info.value.__cause__ is ours
    )
    with pytest.raises(KeyError):  # not ours: untouched, with its traceback
        _raise(KeyError("x"))()
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    with pytest.raises(ConfigError):  # the traceback on request: ours untouched too
        _raise(ours)()
    stop = Preempted("preempted by SIGTERM at step 3: wrote /r/checkpoints/last.ckpt", signum=15)
    with pytest.raises(SystemExit) as exit_info:
        _raise(stop)()
    # its message, on one line
    assert exit_info.value.code == 143 and capsys.readouterr().err == f"{stop}\n"


def test_output_dir_checks(tmp_path: Path) -> None:
    from src.runs.output_dir import check_output_dir

    (tmp_path / "f").write_text("")
    with pytest.raises(ConfigError) as info:
        check_output_dir(tmp_path / "f" / "sweep", "hydra.sweep.dir")
    msg = str(info.value)  # the key and its value, the file in the way, the fix
    assert (
        msg.startswith(f"hydra.sweep.dir={tmp_path / 'f' / 'sweep'} ")
        and f"{tmp_path / 'f'} is a file" in msg
    )
    assert "give a directory outside it" in msg
    # created, writable, nothing left in it
    made = check_output_dir(tmp_path / "a" / "b", "hydra.run.dir")
    assert made.is_dir() and not list(made.iterdir())


@pytest.mark.parametrize("config", ["hydra/default.yaml", "eval.yaml", "inspect_attention.yaml"])
def test_every_app_that_makes_a_run_dir_checks_it(config: str) -> None:
    from omegaconf import OmegaConf

    node = OmegaConf.load(Path(__file__).resolve().parents[1] / "conf" / config)
    hydra = node if config.startswith("hydra/") else node.hydra
    assert hydra.callbacks.output_dir_check._target_ == "src.runs.output_dir.OutputDirCheck"


def test_evaluation_paths_say_directory_or_missing(tmp_path: Path) -> None:
    """A DataError (a ValueError: src.report's handlers print it as one line, clean_errors too)."""
    from src.errors import DataError
    from src.evaluation.inputs import open_text

    with pytest.raises(DataError) as info:
        open_text(tmp_path)
    text = str(info.value)  # the path, what it is, the fix
    assert (
        f"'{tmp_path}'" in text
        and "is a directory" in text
        and "give a text or JSON-lines file" in text
    )
    with pytest.raises(DataError) as info:
        open_text(tmp_path / "nope.txt")
    assert "no such file" in str(info.value) and f"'{tmp_path / 'nope.txt'}'" in str(info.value)


def test_prepare_checks_its_output_directory_before_tokenizing(tmp_path: Path) -> None:
    """src.prepare writes to out_dir (or data.dir, or the token cache): a file there or a path under a
    file is one clear error before any tokenizing (was: a raw FileExistsError / NotADirectoryError)."""
    from src.prepare import prepare

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("hello world, the cat sat on the mat.\n" * 4)
    (tmp_path / "f").write_text("")
    data = {"name": "text", "paths": [str(corpus)], "cache_dir": str(tmp_path / "cache")}
    for out, problem, fix in (
        (tmp_path / "f", "is an existing file", f"e.g. out_dir={tmp_path / 'f'}_run"),
        (tmp_path / "f" / "sub", f"{tmp_path / 'f'} is a file", "give a directory outside it"),
    ):
        with pytest.raises(ConfigError) as info:
            prepare(data, {"name": "char"}, out_dir=str(out), num_proc=1)
        msg = str(info.value)
        assert msg.startswith(f"out_dir={out} ") and problem in msg and fix in msg
    assert (
        prepare(data, {"name": "char"}, out_dir=str(tmp_path / "ok"), num_proc=1) == tmp_path / "ok"
    )
    assert (tmp_path / "ok" / "train.bin").is_file()


def test_train_help_is_one_page_with_the_registries_values() -> None:
    """--help lists the groups and the fixed-value keys (as the registries have them), and the
    examples; not the 200-line composed config (that is --cfg job)."""
    from src.models.components.residual import PLACEMENTS
    from src.models.families import FAMILIES

    r = subprocess.run(
        [sys.executable, "-m", "src.train", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) <= 60 and "model/position: alibi, learned, none, rope" in r.stdout
    assert f"model.norm_placement: {', '.join(PLACEMENTS.names())}" in lines
    assert f"model.family: {', '.join(FAMILIES.names())}" in lines
    assert "--cfg job" in r.stdout and "seed: 1337" not in r.stdout
