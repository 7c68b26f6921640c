"""Every file under conf/model/ composes with Hydra and builds (at tiny size) into a working model.

Files are discovered, not listed, so a new config or group option is tested as soon as it
lands. Sizes are overridden on the command line as a user would (``model.n_layer=2``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import yaml
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig

from src.errors import ConfigError
from src.models import build_model

CONF = Path(__file__).resolve().parents[2] / "conf"
MODEL_CONFIGS = sorted(p.stem for p in (CONF / "model").glob("*.yaml"))
GROUP_OPTIONS = sorted(
    (group.name, p.stem)
    for group in (CONF / "model").iterdir()
    if group.is_dir()
    for p in group.glob("*.yaml")
)
TINY = [
    "model.n_layer=2", "model.d_model=32", "model.n_head=4", "model.d_ff=64",
    "model.max_seq_len=32", "model.vocab_size=101",
]  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def hydra_conf() -> Iterator[None]:
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        yield


def tiny_overrides(model: str) -> list[str]:
    extra = []
    if model == "llama_small":
        extra = ["model.n_kv_head=2"]  # 4 heads; the file's 4 KV heads would be plain MHA
    if model in ("transformer_base", "t5_small"):
        extra = ["model.n_encoder_layer=2", "model.n_decoder_layer=2"]
    return [f"model={model}", *TINY, *extra]


def compose_model(overrides: list[str]) -> DictConfig:
    return compose(config_name="inspect", overrides=overrides).model


def smoke(cfg: DictConfig) -> None:
    """Build the model and run a forward pass with a loss on a few tokens."""
    model = build_model(cfg)
    assert model.num_parameters() > 0
    ids = torch.randint(1, 101, (2, 6))
    kwargs = {"labels": ids}
    if cfg.get("mask") and cfg.mask.name == "prefix_lm":
        kwargs["prefix_length"] = torch.tensor([2, 3])
    if cfg.family == "encoder_decoder":
        kwargs["decoder_input_ids"] = ids
    out = model(ids, **kwargs)
    assert out.logits.shape == (2, 6, 101)
    assert out.loss is not None and torch.isfinite(out.loss)


def test_model_configs_discovered() -> None:
    assert {
        "gpt2_small",
        "tiny",
        "llama_small",
        "bert_base",
        "transformer_base",
        "t5_small",
    } <= set(MODEL_CONFIGS)
    assert {"position", "norm", "ffn", "mask", "qk_norm"} <= {g for g, _ in GROUP_OPTIONS}


def test_each_config_has_its_papers_initialisation() -> None:
    """GPT-2's scheme for GPT-2 and the configs built on its recipe; the 2017 Transformer's code base (fairseq)
    used Xavier-uniform linears and N(0, d^-1/2) embeddings."""
    assert compose_model(["model=gpt2_small"]).init.name == "gpt2"
    cfg = compose_model(["model=transformer_base"])
    assert cfg.init.name == "xavier"
    model = build_model(compose_model(tiny_overrides("transformer_base")))
    emb = next(m for m in model.modules() if isinstance(m, torch.nn.Embedding))
    # N(0, d_model^-1/2) at d_model 32, not 0.02
    assert abs(float(emb.weight.std()) - 32**-0.5) < 0.03


@pytest.mark.parametrize("model", MODEL_CONFIGS)
def test_model_config_composes_and_builds(model: str) -> None:
    full = compose_model([f"model={model}"])
    assert full.name == model  # the file's label matches its name
    cfg = compose_model(tiny_overrides(model))
    assert cfg.n_layer == 2 and cfg.d_model == 32
    smoke(cfg)


@pytest.mark.parametrize(
    ("group", "option"), GROUP_OPTIONS, ids=[f"{g}={o}" for g, o in GROUP_OPTIONS]
)
def test_group_option_with_gpt2_small(group: str, option: str) -> None:
    cfg = compose_model([*tiny_overrides("gpt2_small"), f"model/{group}={option}"])
    registered = yaml.safe_load((CONF / "model" / group / f"{option}.yaml").read_text())["name"]
    assert cfg[group].name == registered  # the option file selects its registered component
    smoke(cfg)


@pytest.mark.parametrize("model", ["bert_base", "transformer_base", "t5_small"])
@pytest.mark.parametrize(
    "group_option",
    [f"model/position={p}" for p in ("learned", "sinusoidal", "rope", "alibi", "none", "t5_bias")]
    + [
        "model/norm=rmsnorm",
        "model/ffn=swiglu",
        "model/ffn=geglu",
        "model/qk_norm=rmsnorm",
        "model/qk_norm=layernorm",
    ]
    + [f"model.norm_placement={p}" for p in ("pre", "post", "sandwich", "deepnorm", "rezero")],
)
def test_group_options_with_encoder_families(model: str, group_option: str) -> None:
    smoke(compose_model([*tiny_overrides(model), group_option]))


@pytest.mark.parametrize("scaling", ["linear", "dynamic", "yarn", "llama3"])
def test_rope_scaling_is_a_key_of_the_rope_option(scaling: str) -> None:
    """``model.position.scaling`` is null in rope.yaml, so a scaling is set on the command line without ``+``."""
    cfg = compose_model(
        [*tiny_overrides("llama_small"), f"model.position.scaling={{name:{scaling},factor:4}}"]
    )
    assert cfg.position.scaling.name == scaling
    smoke(cfg)


def test_encoder_only_takes_a_mask_option() -> None:
    smoke(compose_model([*tiny_overrides("bert_base"), "model/mask=prefix_lm"]))


def test_encoder_decoder_derives_the_causal_mask_and_rejects_another() -> None:
    """The decoder-only defaults' causal mask is what the family's decoder does: it becomes null;
    a prefix-LM or bidirectional mask asks for what the family cannot do."""
    cfg = compose_model([*tiny_overrides("transformer_base"), "+model/mask=causal"])
    assert build_model(cfg).config.mask is None
    for mask in ("prefix_lm", "bidirectional"):
        cfg = compose_model([*tiny_overrides("transformer_base"), f"+model/mask={mask}"])
        with pytest.raises(ConfigError, match=f"model/mask={mask} is for decoder_only"):
            build_model(cfg)


def test_unknown_override_key_fails_in_hydra() -> None:
    with pytest.raises(ConfigCompositionException, match="n_layers"):
        compose_model(["model=tiny", "model.n_layers=2"])


def test_unknown_group_option_fails_in_hydra() -> None:
    with pytest.raises(ConfigCompositionException, match="rotary"):
        compose_model(["model=tiny", "model/position=rotary"])
