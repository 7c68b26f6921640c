"""Every size of a run has a bound, checked at validation (``src.config.size_bounds``): an absurd
batch, length, example count or seed is one line naming the key, the value and the fix, in well
under a second and before any tokenizer, data or model is built."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from src.config.size_bounds import Memory
from src.config.validate import validate_run_config
from src.errors import ConfigError, DataError

TINY = ("model=tiny", "trainer=cpu")
COPY = (*TINY, "data=copy")
#: a machine with 512 MiB of memory: the arithmetic, whatever the machine the tests run on
SMALL = Memory(2**29, "test memory")


def refused(compose, *overrides: str, memory: Memory | None = None) -> str:
    """The one-line message validation raises for ``overrides``, within a second."""
    cfg = compose(*overrides)
    start = time.perf_counter()
    with pytest.raises((ConfigError, DataError)) as info:
        validate_run_config(cfg, memory=memory)
    assert time.perf_counter() - start < 1.0
    message = str(info.value)
    assert "\n" not in message
    return message


def error_line(stderr: str) -> str:
    """The line the CLI prints for one of our errors (``ConfigError: …``)."""
    lines = [line for line in stderr.splitlines() if line.startswith(("ConfigError", "DataError"))]
    assert len(lines) == 1, stderr
    return lines[0]


# ---------------------------------------------------------------- 6: sizes with no bound


@pytest.mark.parametrize(
    ("overrides", "key", "memory"),
    [
        # the test phase: examples held at setup, the forward at the longest length
        (("data.test_lengths=[16,10000000000]",), "data.test_lengths=[16, 10000000000]", None),
        (("data.test_lengths=[16,1000000]",), "data.test_lengths=[16, 1000000]", SMALL),
        (("data.val_examples=1000000000",), "data.val_examples=1000000000", None),
        (("data.test_examples=1000000000",), "data.test_examples=1000000000", None),
        # one example at that size would be drawn, as int64, before any other check
        (("data.length=1000000000",), "data.length=1000000000", None),
        (("data.length=1e9",), "data.length=1000000000.0", None),
    ],
)
def test_synthetic_sizes_are_bounded(compose, overrides, key, memory) -> None:
    message = refused(compose, *COPY, *overrides, memory=memory)
    assert message.startswith(key)
    assert "lower" in message or "integer" in message


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (("batch_size=1000000000",), "batch_size=1000000000 "),
        (("data.val_batch_size=1000000000",), "data.val_batch_size=1000000000 "),
        (("callbacks.probes.batch_size=1000000000",), "callbacks.probes.batch_size=1000000000 "),
        (("callbacks.probes.batch_size=1e9",), "callbacks.probes.batch_size=1000000000.0 "),
    ],
)
def test_batch_sizes_are_bounded_by_memory(compose, overrides, key) -> None:
    message = refused(compose, *TINY, *overrides)
    assert message.startswith(key)
    assert "lower" in message or "positive" in message


def test_the_message_gives_the_bytes_and_the_memory(compose) -> None:
    message = refused(compose, *TINY, "batch_size=100000", memory=SMALL)
    # 100000 x 64 tokens x 2 bytes x 2 layers x (64 + 256): 7.6 GiB
    assert "7.6 GiB" in message and "0.5 GiB of test memory" in message
    assert "accumulate_grad_batches" in message


def test_sizes_that_fit_pass(compose) -> None:
    validate_run_config(compose(*COPY, "data.test_lengths=[16,64]"), memory=SMALL)
    validate_run_config(compose(*TINY, "batch_size=64", "data.val_batch_size=32"), memory=SMALL)


# ---------------------------------------------------------------- 9: ranges


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (("seed=-3",), "seed=-3 "),
        (("seed=4294967296",), "seed=4294967296 "),
        # null is the documented "endless" / "= batch_size"; 0 has no meaning
        (("data.epoch_batches=0",), "data.epoch_batches=0 "),
        (("data.epoch_batches=-1",), "data.epoch_batches=-1 "),
        (("data.val_batch_size=0",), "data.val_batch_size=0 "),
        (("data.val_batch_size=-1",), "data.val_batch_size=-1 "),
        (("callbacks.probes.batch_size=0",), "callbacks.probes.batch_size=0 "),
    ],
)
def test_ranges_are_checked(compose, overrides, key) -> None:
    message = refused(compose, *TINY, *overrides)
    assert message.startswith(key) and "is invalid" in message


def probes_cfg(*overrides: str):
    """conf/inspect_probes.yaml with ``overrides`` (read as a file: the module's Hydra is
    composing conf/train.yaml)."""
    from omegaconf import OmegaConf

    from tests.conftest import CONF_DIR

    cfg = OmegaConf.load(CONF_DIR / "inspect_probes.yaml")
    for key in ("defaults", "hydra"):
        cfg.pop(key, None)
    return OmegaConf.merge(cfg, OmegaConf.from_dotlist(list(overrides)))


@pytest.mark.parametrize(
    ("arg", "shown"),
    [
        ("batch_size=0", "batch_size=0 is invalid"),
        ("batch_size=-2", "batch_size=-2 is invalid"),
        ("batch_size=1e9", "batch_size=1000000000.0 is invalid"),
        ("seed=-3", "seed=-3 is invalid"),
    ],
)
def test_inspect_probes_args_are_checked_before_the_model_loads(arg, shown) -> None:
    from src.inspection.probes import run

    # the model path does not exist: the argument is refused before anything is loaded
    with pytest.raises(ConfigError) as info:
        run(probes_cfg("pretrained=/nonexistent", arg))
    assert str(info.value).startswith(shown)


def test_inspect_probes_batch_is_bounded_by_the_model(monkeypatch) -> None:
    """Once the model is loaded, before the batch is drawn: its attention probabilities."""
    import src.inspection.probes as probes
    from src.models import build_model
    from src.models.config import ModelConfig

    model = build_model(
        ModelConfig(vocab_size=64, n_layer=2, d_model=32, n_head=4, d_ff=64, max_seq_len=64)
    )
    monkeypatch.setattr(probes, "load", lambda *a: (model, "a tiny model"))
    monkeypatch.setattr(probes, "probe_batch", lambda *a: pytest.fail("the batch was drawn"))
    with pytest.raises(ConfigError, match=r"^batch_size=1000000000 is too large: a probe batch"):
        probes.run(probes_cfg("pretrained=/x", "batch_size=1000000000"))


def test_inspect_prints_one_line(run_entry_point) -> None:
    out = run_entry_point(
        "src.inspect", ["probes", "pretrained=/x", "batch_size=0"], cwd=Path.cwd()
    )
    assert out.returncode != 0 and "batch_size=0 is invalid" in error_line(out.stderr)
    assert "Traceback" not in out.stderr
    out = run_entry_point("src.inspect", ["model=tiny", "batch_size=0"], cwd=Path.cwd())
    assert out.returncode != 0 and "batch_size=0 is invalid" in error_line(out.stderr)


def test_train_prints_one_line_before_building_anything(run_entry_point, tmp_path) -> None:
    start = time.perf_counter()
    out = run_entry_point(
        "src.train",
        [*COPY, "data.val_examples=1000000000", f"hydra.run.dir={tmp_path}/run"],
        cwd=tmp_path,
        timeout=120,
    )
    assert time.perf_counter() - start < 120
    assert out.returncode != 0
    assert "data.val_examples=1000000000 is too large" in error_line(out.stderr)
    assert "Traceback" not in out.stderr
