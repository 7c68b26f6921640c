"""End-to-end runs: the quickstart command, every experiment under fast_dev_run, exact resume
after a crash, failures recorded in metrics.json."""

from __future__ import annotations

import json
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from omegaconf import OmegaConf

from src.checkpoints.load import load_checkpoint
from src.training import runner
from tests.training.conftest import (
    CONF,
    SHARED_DATA,
    TINY,
    compose_train,
    read_csv_metrics,
    run_cli,
    series,
    train_in_process,
)


def metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def test_quickstart_command(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    r = run_cli(
        [
            "experiment=quickstart",
            "trainer.max_steps=6",
            "trainer.val_check_interval=3",
            "trainer.limit_val_batches=2",
            "trainer.limit_test_batches=2",
            "callbacks.sample_text.max_new_tokens=80",
            "trainer.log_every_n_steps=1",
            f"hydra.run.dir={run_dir}",
        ],
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    m = metrics(run_dir)
    assert m["status"] == "completed" and m["error"] is None and m["global_step"] == 6
    assert m["tokens_seen"] == 6 * 16 * 64 and m["params"] > 0 and m["wall_time_s"] > 0
    for key in (
        "val/loss",
        "val/ppl",
        "val/acc",
        "test/loss",
        "test/ppl",
        "train/loss",
        "best_step",
    ):
        assert m[key] is not None, key
    assert (run_dir / ".hydra" / "config.yaml").is_file() and (
        run_dir / ".hydra" / "overrides.yaml"
    ).is_file()
    assert (run_dir / "checkpoints" / "last.ckpt").is_file() and list(
        (run_dir / "checkpoints").glob("best-*.ckpt")
    )
    assert series(read_csv_metrics(run_dir), "train/loss")
    sample = (run_dir / "samples.txt").read_text()
    # beyond the 64-token context
    assert (
        sample.startswith("The assert statement") and len(sample) > len("The assert statement") + 40
    )

    # the checkpoint holds plain data only and rebuilds model + tokenizer
    raw = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert (
        raw["hyper_parameters"]["cfg"]["model"]["vocab_size"]
        == raw["hyper_parameters"]["tokenizer"]["chars"].__len__()
    )
    loaded = load_checkpoint(run_dir / "checkpoints" / "last.ckpt")
    ids = torch.tensor([loaded.tokenizer.encode("def f(x):")])
    with torch.no_grad():
        a = loaded.model(ids).logits
    task = type(loaded.task).load_from_checkpoint(
        run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True
    )
    with torch.no_grad():
        b = task.model.eval()(ids).logits
    torch.testing.assert_close(a, b)


def experiments() -> list[str]:
    return sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


# shared bases that other experiments include (`defaults: [study_common]`); not runnable alone
BASES = {"study_common"}
# on CPU, for one step: the run's code path, not its size
CPU_ONLY = [
    "trainer.accelerator=cpu",
    "trainer.devices=1",
    "trainer.num_nodes=1",
    "trainer.strategy=auto",
    "trainer.precision=32",
    "trainer.fast_dev_run=true",
    "callbacks.progress_bar=null",
    "compile=false",
    "batch_size=2",
]


def first_sweep_point(params: dict) -> list[str]:
    """A sweep experiment's first point: ``{key: "a,b"}`` -> ``["key=a"]`` (commas inside brackets kept)."""
    out = []
    for key, values in params.items():
        depth, first = 0, ""
        for ch in str(values):
            if ch == "," and depth == 0:
                break
            depth += ch in "[({"
            depth -= ch in "])}"
            first += ch
        out.append(f"{key}={first.strip()}")
    return out


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n.endswith("_gpu") else n for n in experiments()],
)
def test_experiment_fast_dev_run(name: str, tmp_path: Path) -> None:
    """Every experiment (a sweep: its first point) trains one step on CPU, validates and tests."""
    from hydra.core.hydra_config import HydraConfig

    if name in BASES:
        pytest.skip(f"experiment={name} is a shared base of other experiments")
    overrides = [f"experiment={name}", *CPU_ONLY]
    if name in (
        "shakespeare_char",
        "shakespeare_char_speedrun",
    ):  # the shared input.txt, never a download
        overrides.append(f"data.path={SHARED_DATA / 'tinyshakespeare' / 'input.txt'}")
    compose_train(overrides, tmp_path)
    params = dict(HydraConfig.get().sweeper.get("params") or {})
    cfg = compose_train([*overrides, *first_sweep_point(params)], tmp_path)
    for key in (
        "data.path",
        "data.dir",
        "tokenizer.path",
    ):  # data.dir: token bins src.prepare writes (recipes)
        path = OmegaConf.select(cfg, key, default=None)
        if path and "://" not in str(path) and not Path(str(path)).exists():
            pytest.skip(f"experiment={name} needs {key}={path} (offline data not present)")
    runner.train(cfg)
    m = metrics(tmp_path)
    assert m["status"] == "completed", m["error"]
    assert m["global_step"] == 1


class CrashAt(pl.Callback):
    """Simulates a crash (a killed job) at the start of a given step."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer: pl.Trainer, *args: object) -> None:
        if trainer.global_step == self.step:
            raise RuntimeError(f"simulated crash at step {self.step}")


def test_resume_after_crash_matches_uninterrupted_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    common = [
        *TINY,
        "trainer.max_steps=8",
        "trainer.val_check_interval=4",
        "model.dropout=0.1",
        "seed=7",
    ]
    full_dir, crash_dir, resume_dir = tmp_path / "full", tmp_path / "crash", tmp_path / "resume"
    train_in_process(common, full_dir)

    build = runner.build_trainer
    monkeypatch.setattr(
        runner,
        "build_trainer",
        lambda cfg, extra_callbacks=(): build(cfg, [*extra_callbacks, CrashAt(6)]),
    )
    with pytest.raises(RuntimeError, match="simulated crash at step 6"):
        train_in_process(common, crash_dir)
    m = metrics(crash_dir)
    assert (
        m["status"] == "failed"
        and m["error"] == "RuntimeError: simulated crash at step 6"
        and m["global_step"] == 6
    )
    monkeypatch.setattr(runner, "build_trainer", build)

    last = crash_dir / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 4
    train_in_process([*common, f"ckpt_path={last}"], resume_dir)

    full, resumed = read_csv_metrics(full_dir), read_csv_metrics(resume_dir)
    full_loss, resumed_loss = series(full, "train/loss"), series(resumed, "train/loss")
    # steps after the checkpoint
    assert sorted(resumed_loss) == [s for s in sorted(full_loss) if s >= 4]
    for step, loss in resumed_loss.items():
        assert loss == pytest.approx(full_loss[step], abs=1e-6), f"train/loss at step {step}"
    assert series(resumed, "val/loss")[7] == pytest.approx(series(full, "val/loss")[7], abs=1e-6)
    mf, mr = metrics(full_dir), metrics(resume_dir)
    assert mr["global_step"] == mf["global_step"] == 8 and mr["tokens_seen"] == mf["tokens_seen"]
    assert (
        mr["val/loss"] == pytest.approx(mf["val/loss"], abs=1e-6)
        and mr["best_step"] == mf["best_step"]
    )
    a = torch.load(full_dir / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    b = torch.load(resume_dir / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-6)


def test_setup_error_is_recorded_and_raised(tmp_path: Path) -> None:
    from src.errors import ConfigError

    with pytest.raises(ConfigError, match="raise model.vocab_size"):
        train_in_process([*TINY, "vocab_size_from=model", "model.vocab_size=10"], tmp_path)
    m = metrics(tmp_path)
    assert m["status"] == "failed" and m["error"].startswith("ConfigError: tokenizer=char has")
    assert m["global_step"] == 0 and m["tokens_seen"] == 0


def test_task_that_does_not_fit_the_family_fails_at_build(tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match="objective=masked_lm needs model.family in \\['encoder_only'\\]"
    ):
        train_in_process([*TINY, "objective=masked_lm"], tmp_path)
    assert metrics(tmp_path)["status"] == "failed"


FAMILY_RUNS = {
    "masked_lm": ["model=bert_base", "objective=masked_lm"],
    "seq2seq_text": [
        "model=transformer_base",
        "model.n_encoder_layer=1",
        "model.n_decoder_layer=1",
        "objective=seq2seq",
    ],
    "seq2seq_pairs": [
        "model=transformer_base",
        "model.n_encoder_layer=1",
        "model.n_decoder_layer=1",
        "objective=seq2seq",
        "data=multi30k",
        "tokenizer=gpt2",
        "block_size=16",
    ],
    "decoder_translation_prefix_lm": [
        "objective=decoder_translation",
        "model/mask=prefix_lm",
        "data=multi30k",
        "tokenizer=gpt2",
        "block_size=15",
    ],
    "causal_bf16": ["trainer.precision=bf16-mixed"],
}


@pytest.mark.parametrize("name", sorted(FAMILY_RUNS))
def test_each_objective_runs_end_to_end(name: str, tmp_path: Path) -> None:
    """Task x family x data through the whole runner (2 steps, validation, test)."""
    overrides = [
        *TINY,
        "trainer.max_steps=2",
        "trainer.limit_val_batches=1",
        "trainer.limit_test_batches=1",
        *FAMILY_RUNS[name],
    ]
    if "data=multi30k" in overrides:
        if not (SHARED_DATA / "multi30k_en_de").is_dir():
            pytest.skip("needs ../shared/data/multi30k_en_de (offline copy)")
        overrides.append(f"data.path={SHARED_DATA / 'multi30k_en_de'}")
    train_in_process(overrides, tmp_path)
    m = metrics(tmp_path)
    assert m["status"] == "completed" and m["global_step"] == 2
    assert m["val/loss"] is not None and m["test/loss"] is not None
    loaded = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    assert (
        loaded.cfg["objective"]["name"] == compose_train(overrides, tmp_path / "c").objective.name
    )


def test_the_final_weights_are_validated_and_the_scored_weights_named(tmp_path: Path) -> None:
    """max_steps=6 with val_check_interval=4: Lightning validates at step 4 only; the run validates the
    final weights too, tests the better of the two, and metrics.json says which weights and step."""
    import json

    from tests.training.conftest import TINY, read_csv_metrics, series, train_in_process

    run = tmp_path / "run"
    base = [
        o for o in TINY if not o.startswith(("trainer.max_steps", "trainer.val_check_interval"))
    ]
    train_in_process([*base, "trainer.max_steps=6", "trainer.val_check_interval=4"], run)
    m = json.loads((run / "metrics.json").read_text())
    val = series(read_csv_metrics(run), "val/loss")
    assert sorted(val) == [3, 5]  # CSV steps are 0-based: validations after optimizer steps 4 and 6
    best_step = 4 if val[3] < val[5] else 6
    assert m["global_step"] == 6 and m["best_step"] == best_step
    assert (m["scored_weights"], m["scored_step"]) == (
        ("best", 4) if best_step == 4 else ("final", 6)
    )
    assert m["test/loss"] is not None
