"""The catalogue of docs/reliability.md, read the other way: every exact text it lists is asserted
by a test; plus the values that were accepted silently or ended in a bare TypeError: trainer
values (``trainer.max_epochs=0`` ends ``fit`` before its first step with status 0;
``trainer.devices=-1`` or a list on CPU), unknown keys of ``reliability``/``resume`` (dropped)
and of callback/logger nodes (a ``TypeError`` when instantiated).

test_error_catalogue.py checks that each of its cases is in the docs; this file checks that the
docs hold no text that no test produces (a stale or invented message).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from src.config.validate import validate_run_config
from src.errors import CheckpointError, RunConfigError
from tests.reliability import test_error_catalogue as catalogue
from tests.reliability.conftest import REPO
from tests.reliability.test_error_catalogue import CPU, GPU_BF16, Case

RUN_VALUE_CASES = [
    # the schedule's horizon defaults to trainer.max_steps: the trainer's own message comes first
    Case("max_steps-0", ["trainer.max_steps=0"], RunConfigError,
         "trainer.max_steps=0 is invalid: a positive number of optimizer steps, or -1 (use max_epochs)"),
    Case("max_epochs-0", ["trainer.max_epochs=0"], RunConfigError,
         "trainer.max_epochs=0 is invalid: a number of epochs, 1 or more, -1 (no limit: max_steps decides) or null"),
    Case("cpu-devices-negative", ["trainer=cpu", "trainer.devices=-1"], RunConfigError,
         "trainer.devices=-1 is invalid: on CPU a number of processes, 1 or more, or auto (GPU indices and -1 are for "
         "trainer.accelerator=gpu)"),
    Case("cpu-devices-list", ["trainer=ddp_cpu", "trainer.devices=[0,1]"], RunConfigError,
         "trainer.devices=[0, 1] is invalid: on CPU a number of processes, 1 or more, or auto (GPU indices and -1 are "
         "for trainer.accelerator=gpu)"),
    Case("gpu-devices-negative", ["trainer=gpu", "trainer.devices=-2"], RunConfigError,
         "trainer.devices=-2 is invalid: a number of GPUs, 1 or more, a list of GPU indices, -1 (all) or auto",
         hardware=GPU_BF16),
    # keys of the nodes nothing else checks: each would be dropped (reliability, resume) or end in a bare TypeError
    Case("reliability-typo", ["+reliability.nonfinit=skip"], RunConfigError,
         "reliability.nonfinit='skip' is not a key of conf/reliability/default.yaml (accepted: nonfinite, "
         "check_every_n_steps, max_consecutive_skips); fix the spelling or remove the override"),
    Case("resume-typo", ["+resume.allow_changes=[model.dropout]"], RunConfigError,
         "resume.allow_changes=['model.dropout'] is not a key of conf/train.yaml (accepted: allow_config_change); fix "
         "the spelling or remove the override"),
    Case("allow-list-not-a-list", ["resume.allow_config_change=model"], CheckpointError,
         "resume.allow_config_change='model' is invalid: a list of config keys or nodes, e.g. "
         "resume.allow_config_change=[model.dropout,data]"),
    # the accepted lists are Lightning's signatures (they change with its version): asserted up to them
    Case("logger-key-typo", ["logger=csv", "+logger.csv.nme=x"], RunConfigError,
         "logger.csv.nme='x' is not a key of lightning.pytorch.loggers.CSVLogger (accepted: save_dir, name, ", exact=False),
    Case("callback-key-typo", ["+callbacks.model_checkpoint.monitr=val/loss"], RunConfigError,
         "callbacks.model_checkpoint.monitr='val/loss' is not a key of lightning.pytorch.callbacks.ModelCheckpoint "
         "(accepted: dirpath, filename, monitor, ", exact=False),
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
    validate_run_config(compose("trainer.max_epochs=2", "trainer.max_steps=-1", "scheduler.decay_steps=8"),
                        hardware=CPU)


def _catalogue_block() -> list[str]:
    """The lines of the first ```text block of docs/reliability.md §3 (the exact case texts)."""
    docs = (REPO / "docs" / "reliability.md").read_text()
    section = docs.split("## 3. Error catalogue", 1)[1]
    block = section.split("```text\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line]


def test_every_catalogued_text_is_tested() -> None:
    """Each line of the catalogue's case block is (a line of) the exact text some test asserts."""
    cases = [c for c in (*catalogue.CONFIG_CASES, *catalogue.COMPOSE_CASES, *RUN_VALUE_CASES) if c.exact]
    tested = {line for c in cases if "{" not in c.message for line in c.message.splitlines()}
    tested |= {m for _, _, m in catalogue.GENERATION_CASES}
    untested = [line for line in _catalogue_block() if line not in tested]
    assert not untested, f"docs/reliability.md lists texts no test asserts: {untested}"


def test_docs_list_these_cases() -> None:
    block = set(_catalogue_block())
    assert not [c.message for c in RUN_VALUE_CASES if c.exact and c.message not in block]
