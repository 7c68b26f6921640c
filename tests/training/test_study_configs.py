"""Every study config composes, defines its sweep and a fixed sweep directory, declares a protocol
(docs/studies.md) over exactly the variants it sweeps, and builds its model."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import src.runs  # noqa: F401  (the ${sweep_subdir:} resolver)
from src.models.matching import count_parameters, reference_config
from src.runs.resume import job_dirname
from src.studies.protocol import Protocol, as_number
from src.studies.runs import parse_override

CONF = Path(__file__).resolve().parents[2] / "conf"
STUDIES = sorted(
    p.stem for p in (CONF / "experiment").glob("study_*.yaml") if p.stem != "study_common"
)
FAMILIES = sorted(p.stem for p in (CONF / "experiment" / "study_families").glob("*.yaml"))


def _compose(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("train", overrides=list(overrides), return_hydra_config=True)


def swept_values(key: str, value: object) -> list[str]:
    """The values a sweeper param sweeps, as Hydra reads them (``a,b`` or ``choice(a)``)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    o = OverridesParser.create().parse_overrides([f"{key}={value}"])[0]
    return list(o.sweep_string_iterator()) if o.is_sweep_override() else [str(value)]


@pytest.mark.parametrize("study", STUDIES)
def test_study_composes_with_a_sweep(study: str) -> None:
    cfg = _compose(f"experiment={study}")
    assert (
        cfg.hydra.sweep.dir.startswith("outputs/studies/") and "unnamed" not in cfg.hydra.sweep.dir
    )
    raw = OmegaConf.to_container(cfg.hydra.sweep, resolve=False)
    assert raw["subdir"] == "${sweep_subdir:${hydra.job.override_dirname}}"
    params = cfg.hydra.sweeper.params
    # seeds come from the protocol (python -m src.study)
    assert params is not None and "seed" not in params
    assert cfg.sweep_resume.skip_completed is True
    variants = [parse_override(k)[0] for k in params]
    assert variants, f"{study} sweeps nothing"
    protocol = Protocol.from_config(OmegaConf.to_container(cfg, resolve=False))
    assert protocol is not None and sorted(protocol.factors) == sorted(variants)
    lrs = [as_number(x) for x in protocol.tune["optim.lr"]]  # 3-5 log-spaced learning rates
    ratios = [b / a for a, b in zip(lrs, lrs[1:])]
    assert 3 <= len(lrs) <= 5 and all(r > 1.5 for r in ratios) and max(ratios) / min(ratios) < 1.2
    assert len(protocol.seeds) >= 3 and (protocol.design == "grid" or protocol.tune_seeds)
    # confirm seeds never repeat a tuning run
    assert set(protocol.seeds).isdisjoint(protocol.tune_seeds)
    assert (
        protocol.metric.startswith("test/")
        and protocol.select.startswith("val/")
        and protocol.baseline
    )
    baseline = dict(x.split("=", 1) for x in protocol.baseline.split(","))
    for key, value in baseline.items():
        swept = {parse_override(k)[0]: swept_values(k, v) for k, v in params.items()}
        assert value in swept[key], (
            f"{study}: protocol.baseline {key}={value} is not one of the swept values"
        )
    callbacks = OmegaConf.to_container(cfg.callbacks, resolve=False)
    assert (
        callbacks["ngram_reference"]["_target_"] == "src.callbacks.ngram_reference.NgramReference"
    )
    model = OmegaConf.to_container(cfg.model, resolve=False)
    model["max_seq_len"] = int(cfg.block_size)
    model["vocab_size"] = 2000
    assert count_parameters(model) > 0


@pytest.mark.parametrize("variant", FAMILIES)
def test_family_variants_match_parameters(variant: str) -> None:
    cfg = _compose("experiment=study_families", f"+experiment/study_families={variant}")
    model = OmegaConf.to_container(cfg.model, resolve=False)
    model["max_seq_len"] = 80
    model["vocab_size"] = 2000
    ref = cfg.match_params.reference
    if ref is not None:
        target = count_parameters(reference_config(OmegaConf.to_container(ref), model))
        assert target == count_parameters(
            dict(model, family="decoder_only", mask={"name": "causal"})
        )


def test_job_dirname() -> None:
    assert job_dirname("model/position=rope,seed=1") == "model.position=rope,seed=1"
    assert job_dirname("") == "default"
    long = job_dirname("a=" + "x" * 300)
    assert len(long) == 120 and long != job_dirname("a=" + "x" * 299)
