"""The scaling study's config (conf/experiment/study_scaling.yaml and its arm / size groups): at least
4 sizes spanning at least 10x in parameters, tokens proportional to parameters, the two contrasts,
and a protocol that tunes the learning rate per arm and size on one seed and confirms on 3."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import src.runs  # noqa: F401  (the ${sweep_subdir:} resolver)
from src.models.matching import count_parameters
from src.studies.protocol import Protocol
from src.studies.stages import tune_commands
from src.study import plan

CONF = Path(__file__).resolve().parents[2] / "conf"
GROUP = CONF / "experiment" / "study_scaling"
# the CPU size's (experiment=study_scaling)
SIZES = sorted(p.stem for p in (GROUP / "size").glob("l*.yaml"))
# the GPU size's (experiment=study_scaling_gpu)
GPU_SIZES = sorted(p.stem for p in (GROUP / "size").glob("g*.yaml"))
ARMS = sorted(p.stem for p in (GROUP / "arm").glob("*.yaml"))
CHAR_VOCAB = 65  # Tiny Shakespeare's characters
GPT2_VOCAB = 50257


def _compose(*overrides: str, experiment: str = "study_scaling"):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("train", overrides=[f"experiment={experiment}", *overrides])


def _params(cfg, vocab: int = CHAR_VOCAB) -> int:
    model = OmegaConf.to_container(cfg.model, resolve=False)
    model["max_seq_len"], model["vocab_size"] = int(cfg.block_size), vocab
    return count_parameters(model)


def test_sizes_span_ten_x_with_tokens_proportional_to_parameters() -> None:
    assert len(SIZES) >= 4
    counts, ratios = [], []
    for size in SIZES:
        cfg = _compose(
            f"+experiment/study_scaling/size={size}", "+experiment/study_scaling/arm=pre_learned"
        )
        n = _params(cfg)
        steps = int(cfg.trainer.max_steps)
        tokens = steps * int(cfg.batch_size) * int(cfg.block_size)
        counts.append(n)
        ratios.append(tokens / n)
        assert steps % int(cfg.trainer.val_check_interval) == 0, (
            f"{size}: the last step is not validated"
        )
        assert int(cfg.scheduler.warmup_steps) == pytest.approx(steps / 10, abs=1)
        assert int(cfg.model.d_model) % int(cfg.model.n_head) == 0 and int(
            cfg.model.d_ff
        ) == 4 * int(cfg.model.d_model)
    assert max(counts) / min(counts) >= 10
    assert max(ratios) / min(ratios) < 1.01 and ratios[0] == pytest.approx(9, rel=0.01)


@pytest.mark.parametrize(
    "arm,placement,position",
    [
        ("pre_learned", "pre", "learned"),
        ("post_learned", "post", "learned"),
        ("pre_rope", "pre", "rope"),
    ],
)
def test_arms_are_the_two_contrasts(arm: str, placement: str, position: str) -> None:
    assert arm in ARMS
    cfg = _compose(f"+experiment/study_scaling/arm={arm}", "+experiment/study_scaling/size=l2_d32")
    assert cfg.model.norm_placement == placement and cfg.model.position.name == position
    # the size file wins over the config's own
    assert int(cfg.model.n_layer) == 2 and int(cfg.model.d_model) == 32


def test_protocol_tunes_each_arm_and_size_and_plans_every_job(tmp_path: Path) -> None:
    cfg = _compose()
    protocol = Protocol.from_config(OmegaConf.to_container(cfg, resolve=False))
    assert protocol is not None and protocol.design == "two_stage" and len(protocol.tune_seeds) == 1
    assert len(protocol.seeds) >= 3 and len(protocol.tune["optim.lr"]) >= 3
    p = plan(["experiment=study_scaling", f"hydra.sweep.dir={tmp_path}"])
    assert len(p.variants) == len(ARMS) * len(SIZES)
    (cmd,) = tune_commands(p)
    assert (
        f"+experiment/study_scaling/size={','.join(['l2_d32', 'l2_d48', 'l3_d64', 'l4_d80'])}"
        in cmd
    )
    assert "seed=0" in cmd and "protocol.stage=tune" in cmd


def test_gpu_size_spans_ten_x_up_to_gpt2_small_with_the_cpu_sizes_token_ratio() -> None:
    """experiment=study_scaling_gpu: 4 BPE sizes on FineWeb-Edu, 9 tokens per parameter as on CPU, the largest GPT-2
    small exactly (124,439,808 parameters), bf16, and a sweep over exactly these sizes."""
    assert len(GPU_SIZES) >= 4
    counts, ratios = [], []
    for size in GPU_SIZES:
        cfg = _compose(
            f"+experiment/study_scaling/size={size}",
            "+experiment/study_scaling/arm=pre_learned",
            experiment="study_scaling_gpu",
        )
        n = _params(cfg, GPT2_VOCAB)
        steps = int(cfg.trainer.max_steps)
        counts.append(n)
        ratios.append(steps * int(cfg.batch_size) * int(cfg.block_size) / n)
        assert steps % int(cfg.trainer.val_check_interval) == 0, (
            f"{size}: the last step is not validated"
        )
        assert int(cfg.scheduler.warmup_steps) == pytest.approx(steps / 10, abs=1)
        assert (
            cfg.trainer.precision == "bf16-mixed"
            and cfg.data.name == "bin"
            and int(cfg.block_size) == 1024
        )
    assert max(counts) == 124_439_808 and max(counts) / min(counts) >= 10
    assert max(ratios) / min(ratios) < 1.01 and ratios[0] == pytest.approx(9, rel=0.01)
    for experiment, sizes in (
        ("study_scaling_gpu", GPU_SIZES),
        ("study_scaling", SIZES),
    ):  # each sweeps its own sizes
        swept = OmegaConf.load(CONF / "experiment" / f"{experiment}.yaml").hydra.sweeper.params
        assert set(str(swept["+experiment/study_scaling/size"]).split(",")) == set(sizes)
    cfg = _compose(experiment="study_scaling_gpu")
    protocol = Protocol.from_config(OmegaConf.to_container(cfg, resolve=False))
    assert protocol is not None and len(protocol.tune["optim.lr"]) >= 3 and len(protocol.seeds) >= 3
