"""Study 2's configs (issue 28): part 1, conf/experiment/study_length_generalization.yaml and its task group (each
task selects its data and its steps), at the CPU and the GPU size; part 2, conf/experiment/study_positions.yaml (six
schemes on text, scored at 1x-8x, RoPE's evaluation-time scalings, the sinusoidal baseline)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import src.runs  # noqa: F401  (the ${sweep_subdir:} resolver)
import src.training  # noqa: F401  (the ${device_precision:} resolver and the others src.train registers)
from src.config.trainer_checks import Hardware
from src.config.validate import validate_run_config
from src.studies.protocol import Protocol
from src.studies.stages import tune_commands
from src.study import plan

CONF = Path(__file__).resolve().parents[2] / "conf"
GROUP = CONF / "experiment" / "study_length_generalization" / "task"
OBJECTIVES = ("copy", "reverse", "addition", "induction", "mqar")
POSITIONS = {"learned", "sinusoidal", "rope", "alibi", "t5_bias", "none"}
GPU = Hardware(cuda_available=True, cuda_count=1, bf16_supported=True, device_name="NVIDIA H200")


def _compose(experiment: str, *overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        # paths at placeholders: there is no Hydra run directory to resolve them from
        return compose(
            "train",
            overrides=[
                f"experiment={experiment}",
                "paths.output_dir=/tmp/unused",
                "paths.root_dir=/tmp",
                *overrides,
            ],
        )


@pytest.mark.parametrize("size", ["cpu", "gpu"])
@pytest.mark.parametrize("task", OBJECTIVES)
def test_each_task_selects_its_data_and_steps_and_validates_with_every_scheme(
    task: str, size: str
) -> None:
    experiment = "study_length_generalization" + ("_gpu" if size == "gpu" else "")
    name = task + ("_gpu" if size == "gpu" else "")
    own = OmegaConf.load(GROUP / f"{name}.yaml")
    for position in sorted(POSITIONS):
        cfg = _compose(
            experiment,
            f"+experiment/study_length_generalization/task={name}",
            f"model/position={position}",
        )
        assert (
            cfg.data.name == task
            and cfg.objective.name == "synthetic"
            and cfg.model.position.name == position
        )
        # the task's steps win over the config's
        assert int(cfg.trainer.max_steps) == int(own.trainer.max_steps)
        # the last step is validated
        assert int(cfg.trainer.max_steps) % int(cfg.trainer.val_check_interval) == 0
        for key, value in (own.get("data") or {}).items():
            assert cfg.data[key] == value
        # test lengths within each task's limits
        validate_run_config(cfg, hardware=GPU if size == "gpu" else None)
    if size == "gpu":
        assert cfg.trainer.precision == "bf16-mixed" and int(cfg.data.test_examples) == 1024


def test_synthetic_protocol_plans_thirty_variants_over_both_factors(tmp_path: Path) -> None:
    cfg = _compose("study_length_generalization")
    protocol = Protocol.from_config(OmegaConf.to_container(cfg, resolve=False))
    assert (
        protocol is not None
        and protocol.metric == "test/exact_match"
        and len(protocol.tune["optim.lr"]) >= 3
    )
    assert len(protocol.seeds) >= 5 and protocol.factors == [
        "model/position",
        "experiment/study_length_generalization/task",
    ]
    assert (
        cfg.report.equivalence_margin["test/exact_match"] == 0.05
        and int(cfg.callbacks.probes.every_n_steps) > 0
    )
    p = plan(["experiment=study_length_generalization", f"hydra.sweep.dir={tmp_path}"])
    assert len(p.variants) == len(POSITIONS) * len(OBJECTIVES)
    (cmd,) = tune_commands(p)
    assert (
        f"+experiment/study_length_generalization/task={','.join(OBJECTIVES)}" in cmd
        and "seed=0" in cmd
    )
    for experiment, tasks in (
        ("study_length_generalization", OBJECTIVES),
        ("study_length_generalization_gpu", tuple(t + "_gpu" for t in OBJECTIVES)),
    ):
        swept = OmegaConf.load(CONF / "experiment" / f"{experiment}.yaml").hydra.sweeper.params
        assert tuple(str(swept["+experiment/study_length_generalization/task"]).split(",")) == tasks
        assert set(str(swept["model/position"]).split(",")) == POSITIONS


def test_ablation_task_is_copy_trained_at_every_size_up_to_the_training_one() -> None:
    """objective=copy_mixed: objective=copy's data, steps and test sizes, the training batches at sizes 1-16 instead of 16."""
    base = _compose(
        "study_length_generalization", "+experiment/study_length_generalization/task=copy"
    )
    mixed = _compose(
        "study_length_generalization", "+experiment/study_length_generalization/task=copy_mixed"
    )
    assert base.data.train_min_length is None and mixed.data.train_min_length == 1
    differ = {k for k in set(base.data) | set(mixed.data) if base.data.get(k) != mixed.data.get(k)}
    assert differ == {"train_min_length"}
    assert mixed.trainer.max_steps == base.trainer.max_steps and mixed.data.length == 16
    for position in sorted(POSITIONS):
        validate_run_config(
            _compose(
                "study_length_generalization",
                "+experiment/study_length_generalization/task=copy_mixed",
                f"model/position={position}",
            )
        )


def test_size_ablation_is_copy_mixed_deeper_longer_and_tested_between_one_and_two_x(
    tmp_path: Path,
) -> None:
    """objective=copy_mixed_deep: copy_mixed with 4 layers, 2x the steps, tested at 16-32 symbols, on its own 3-rate grid."""
    mixed = _compose(
        "study_length_generalization", "+experiment/study_length_generalization/task=copy_mixed"
    )
    deep = _compose(
        "study_length_generalization",
        "+experiment/study_length_generalization/task=copy_mixed_deep",
    )
    assert (
        deep.model.n_layer == 2 * mixed.model.n_layer == 4
        and deep.trainer.max_steps == 2 * mixed.trainer.max_steps
    )
    assert {
        k for k in set(mixed.data) | set(deep.data) if mixed.data.get(k) != deep.data.get(k)
    } == {"test_lengths"}
    assert list(deep.data.test_lengths) == [16, 18, 20, 24, 32] and deep.data.train_min_length == 1
    assert Protocol.from_config(OmegaConf.to_container(deep, resolve=False)).tune["optim.lr"] == [
        "0.0003",
        "0.001",
        "0.003",
    ]
    # 24 symbols (50 tokens) fit the learned table's 64 rows; 32 (66) do not
    for position in sorted(POSITIONS):
        validate_run_config(
            _compose(
                "study_length_generalization",
                "+experiment/study_length_generalization/task=copy_mixed_deep",
                f"model/position={position}",
            )
        )
    p = plan(
        [
            "experiment=study_length_generalization",
            f"hydra.sweep.dir={tmp_path}",
            "+experiment/study_length_generalization/task=copy_mixed_deep",
        ]
    )
    (cmd,) = tune_commands(p)
    assert "optim.lr=0.0003,0.001,0.003" in cmd and len(p.variants) == len(POSITIONS)


def test_format_ablation_is_copy_mixed_deep_over_binary_strings() -> None:
    """objective=copy_binary: copy_mixed_deep with data.alphabet=2 and nothing else changed (its 3-rate grid included), and
    the composed config validates for every scheme."""
    deep = _compose(
        "study_length_generalization",
        "+experiment/study_length_generalization/task=copy_mixed_deep",
    )
    binary = _compose(
        "study_length_generalization", "+experiment/study_length_generalization/task=copy_binary"
    )
    assert {
        k for k in set(deep.data) | set(binary.data) if deep.data.get(k) != binary.data.get(k)
    } == {"alphabet"}
    assert binary.data.alphabet == 2 and deep.data.alphabet == 10
    plain = lambda c: OmegaConf.to_container(c, resolve=False)  # noqa: E731
    assert plain(binary.model) == plain(deep.model) and plain(binary.trainer) == plain(deep.trainer)
    assert plain(binary.protocol) == plain(deep.protocol)
    for position in sorted(POSITIONS):
        validate_run_config(
            _compose(
                "study_length_generalization",
                "+experiment/study_length_generalization/task=copy_binary",
                f"model/position={position}",
            )
        )


@pytest.mark.parametrize("experiment", ["study_positions", "study_positions_gpu"])
def test_text_part_scores_six_schemes_at_one_to_eight_x_against_sinusoidal(experiment: str) -> None:
    cfg = _compose(experiment)
    swept = OmegaConf.load(CONF / "experiment" / "study_positions.yaml").hydra.sweeper.params
    assert set(str(swept["model/position"]).split(",")) == POSITIONS
    ext = cfg.callbacks.extrapolation
    assert (
        list(ext.factors) == [1, 2, 4, 8]
        and list(ext.scalings) == ["linear", "dynamic", "yarn"]
        and ext.split == "test"
    )
    protocol = Protocol.from_config(OmegaConf.to_container(cfg, resolve=False))
    assert (
        protocol is not None
        and protocol.baseline == "model/position=sinusoidal"
        and protocol.comparisons == "one_factor"
    )
    assert {"extrapolation/ppl@2x", "extrapolation/ppl@4x", "extrapolation/ppl@8x"} <= set(
        protocol.secondary
    )
    # the learned table ends at the training length
    assert int(cfg.model.max_seq_len) == int(cfg.block_size)
    validate_run_config(
        _compose(experiment, "model/position=rope"),
        hardware=GPU if experiment.endswith("gpu") else None,
    )
