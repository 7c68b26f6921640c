"""The error types, read the other way, plus the values that were accepted silently or ended in a
bare TypeError.

* every type of ``src/errors.py`` is raised somewhere in ``src/``, each time with its finished
  message (STYLE habit 15: written once, where it is raised: one message argument, no code or
  fields that a table would fill in), is printed by the CLI's clean-error path as that message,
  and has its section in docs/reliability.md §3 (so a new type is documented or the suite fails);
* every other exception class defined in ``src/`` is in §3's table of types kept beside their
  code, with the reason it is its own type (and the table lists nothing that is gone);
* trainer values (``trainer.max_epochs=0`` ends ``fit`` before its first step with status 0;
  ``trainer.devices=-1`` or a list on CPU), unknown keys of ``reliability``/``resume`` (dropped)
  and of callback/logger nodes (a ``TypeError`` when instantiated) each get a message naming the
  key, the value and the fix.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from src import errors
from src.config.validate import validate_run_config
from src.errors import CheckpointError, ConfigError
from tests.config import test_error_catalogue as catalogue
from tests.config.test_error_catalogue import CPU, GPU_BF16, Case

REPO = Path(__file__).resolve().parents[2]
TYPES = [
    c
    for c in vars(errors).values()
    if isinstance(c, type) and issubclass(c, BaseException) and c.__module__ == errors.__name__
]

RUN_VALUE_CASES = [
    # the schedule's horizon defaults to trainer.max_steps: the trainer's own message comes first
    Case(
        "max_steps-0",
        ["trainer.max_steps=0"],
        ConfigError,
        ("trainer.max_steps=0",),
        "a positive number of optimizer steps, or -1 (use max_epochs)",
    ),
    Case(
        "max_epochs-0",
        ["trainer.max_epochs=0"],
        ConfigError,
        ("trainer.max_epochs=0",),
        "a number of epochs, 1 or more, -1 (no limit: max_steps decides) or null",
    ),
    Case(
        "cpu-devices-negative",
        ["trainer=cpu", "trainer.devices=-1"],
        ConfigError,
        ("trainer.devices=-1",),
        "on CPU a number of processes, 1 or more, or auto",
    ),
    Case(
        "cpu-devices-list",
        ["trainer=ddp_cpu", "trainer.devices=[0,1]"],
        ConfigError,
        ("trainer.devices=[0, 1]",),
        "on CPU a number of processes, 1 or more, or auto",
    ),
    Case(
        "gpu-devices-negative",
        ["trainer=gpu", "trainer.devices=-2"],
        ConfigError,
        ("trainer.devices=-2",),
        "a number of GPUs, 1 or more, a list of GPU indices, -1 (all) or auto",
        hardware=GPU_BF16,
    ),
    # keys of the nodes nothing else checks: each would be dropped (reliability, resume) or end in a bare TypeError
    Case(
        "reliability-typo",
        ["+reliability.nonfinit=skip"],
        ConfigError,
        ("reliability.nonfinit='skip'", "conf/reliability/default.yaml"),
        "(accepted: nonfinite, check_every_n_steps, max_consecutive_skips, abandon_step_after_s); "
        "fix the spelling",
    ),
    Case(
        "reliability-abandon-negative",
        ["reliability.abandon_step_after_s=-1"],
        ConfigError,
        ("reliability.abandon_step_after_s=-1",),
        "use seconds >= 0 (a step at least this slow is abandoned on SIGTERM) or null",
    ),
    Case(
        "resume-typo",
        ["+resume.allow_changes=[model.dropout]"],
        ConfigError,
        ("resume.allow_changes=['model.dropout']",),
        "(accepted: allow_config_change); fix the spelling",
    ),
    Case(
        "allow-list-not-a-list",
        ["resume.allow_config_change=model"],
        CheckpointError,
        ("resume.allow_config_change='model'",),
        "e.g. resume.allow_config_change=[model.dropout,data]",
    ),
    # the accepted lists are Lightning's signatures (they change with its version): asserted up to them
    Case(
        "logger-key-typo",
        ["logger=csv", "+logger.csv.nme=x"],
        ConfigError,
        ("logger.csv.nme='x'", "lightning.pytorch.loggers.CSVLogger"),
        "(accepted: save_dir, name, ",
    ),
    Case(
        "callback-key-typo",
        ["+callbacks.model_checkpoint.monitr=val/loss"],
        ConfigError,
        (
            "callbacks.model_checkpoint.monitr='val/loss'",
            "lightning.pytorch.callbacks.ModelCheckpoint",
        ),
        "(accepted: dirpath, filename, monitor, ",
    ),
]


@pytest.mark.parametrize("case", RUN_VALUE_CASES, ids=lambda c: c.id)
def test_bad_run_value(case: Case, compose: Callable[..., Any]) -> None:
    cfg = compose(*case.overrides)
    with pytest.raises(Exception) as info:
        validate_run_config(cfg, hardware=case.hardware)
    catalogue.check(info.value, case)


def test_good_device_values_pass(compose: Callable[..., Any]) -> None:
    """No false alarms: CPU process counts and auto, GPU -1 and index lists."""
    validate_run_config(compose("trainer=ddp_cpu", "trainer.devices=2"), hardware=CPU)
    validate_run_config(compose("trainer=cpu", "trainer.devices=auto"), hardware=CPU)
    validate_run_config(compose("trainer=gpu", "trainer.devices=-1"), hardware=GPU_BF16)
    validate_run_config(compose("trainer=ddp", "trainer.devices=[0,1]"), hardware=GPU_BF16)
    validate_run_config(
        compose("trainer.max_epochs=2", "trainer.max_steps=-1", "scheduler.decay_steps=8"),
        hardware=CPU,
    )


# ---------------------------------------------------------------- the types of src/errors.py


def _constructions() -> dict[str, list[tuple[str, ast.Call]]]:
    """``{type name: [(where, call)]}`` for every call of a src.errors type in ``src/`` (outside src/errors.py)."""
    names = {t.__name__ for t in TYPES}
    found: dict[str, list[tuple[str, ast.Call]]] = {n: [] for n in names}
    for path in sorted((REPO / "src").rglob("*.py")):
        if path.name == "errors.py" and path.parent.name == "src":
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Call):
                f = node.func
                name = (
                    f.id
                    if isinstance(f, ast.Name)
                    else f.attr
                    if isinstance(f, ast.Attribute)
                    else None
                )
                if name in names:
                    found[name].append((f"{path.relative_to(REPO)}:{node.lineno}", node))
    return found


def test_every_type_is_raised_with_its_finished_message() -> None:
    """Each type is used, and each use passes the message itself: one argument that is not a bare
    code (``ConfigError("bad_value", key=...)`` would be a table lookup), no keyword fields
    (``Preempted`` adds its signal number, for the exit status)."""
    calls = _constructions()
    assert not [n for n, sites in calls.items() if not sites], (
        "types of src/errors.py that nothing raises"
    )
    wrong = []
    for name, sites in calls.items():
        for where, call in sites:
            extra = {k.arg for k in call.keywords} - ({"signum"} if name == "Preempted" else set())
            n_args = len(call.args) + (
                1 if name == "Preempted" and "signum" in {k.arg for k in call.keywords} else 0
            )
            first = call.args[0] if call.args else None
            a_code = (
                isinstance(first, ast.Constant)
                and isinstance(first.value, str)
                and first.value.isidentifier()
            )
            if extra or a_code or n_args != (2 if name == "Preempted" else 1):
                wrong.append(f"{where}: {ast.unparse(call)[:100]}")
    assert not wrong, (
        "a src.errors type built from a code or fields, not its message:\n" + "\n".join(wrong)
    )


@pytest.mark.parametrize("cls", TYPES, ids=lambda c: c.__name__)
def test_every_type_is_printed_as_its_message(
    cls: type[BaseException], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``clean_errors`` treats each type as ours: one line, ``<Type>: <message>`` (a preemption: its
    message on stderr and exit status 128 + the signal)."""
    from src.cli import CommandError, clean_errors

    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    message = "model.n_head=5 is invalid: choose a divisor of model.d_model"
    error = cls(message, 15) if cls is errors.Preempted else cls(message)
    with pytest.raises(SystemExit if cls is errors.Preempted else CommandError) as info:
        with clean_errors():
            raise error
    if cls is errors.Preempted:
        assert info.value.code == 143 and capsys.readouterr().err == f"{message}\n"
    else:
        assert str(info.value) == f"{cls.__name__}: {message}" and info.value.__cause__ is error


def test_docs_describe_every_type() -> None:
    """docs/reliability.md §3 has a section per type: when it is raised, an example, what to do."""
    section = (
        (REPO / "docs" / "reliability.md").read_text().split("## 3. ", 1)[1].split("\n## ", 1)[0]
    )
    headings = {line.strip("# `") for line in section.splitlines() if line.startswith("### ")}
    assert {t.__name__ for t in TYPES} <= headings, (
        f"undocumented: {sorted({t.__name__ for t in TYPES} - headings)}"
    )


# ---------------------------------------------------------------- exception classes defined elsewhere

EXCEPTION_BASE = ("Error", "Exception", "Exit", "Preempted")  # how a base class's name ends


def exception_classes() -> list[tuple[str, str]]:
    """``(module, class)`` for every class in ``src/`` whose base is an exception class (its name
    ends in Error, Exception or Exit, or is one of ours), src/errors.py included."""
    found = []
    for path in sorted((REPO / "src").rglob("*.py")):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                bases = [
                    b.id
                    if isinstance(b, ast.Name)
                    else b.attr
                    if isinstance(b, ast.Attribute)
                    else ""
                    for b in node.bases
                ]
                if any(b.endswith(EXCEPTION_BASE) for b in bases):
                    found.append((module, node.name))
    return found


def test_types_defined_elsewhere_are_the_documented_few() -> None:
    """Every user-facing problem is a type of src/errors.py; a class kept beside its code is listed
    in docs/reliability.md §3's table with why (a caller catches exactly it, or it is how an error
    leaves the program), so a new one is justified there or the suite fails."""
    section = (
        (REPO / "docs" / "reliability.md")
        .read_text()
        .split("### Errors kept beside their code", 1)[1]
    )
    section = section.split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    documented = {line.split("`")[1] for line in rows}
    assert all(line.rstrip(" |").rsplit("|", 1)[1].strip() for line in rows), (
        "a kept type without its reason"
    )
    elsewhere = {name for module, name in exception_classes() if module != errors.__name__}
    assert elsewhere == documented, (
        f"defined outside src/errors.py, not in the table: {sorted(elsewhere - documented)}; "
        f"in the table, not defined: {sorted(documented - elsewhere)}"
    )
