"""Table-driven: bad configurations and bad data inputs, each with the error it gets.

Config cases go through Hydra composition of conf/train.yaml and
``src.config.validate.validate_run_config`` (which ``build_run`` calls before anything heavy);
hardware-dependent cases pass a ``Hardware`` so they do not depend on the machine. Data cases
build the datamodule the way a run does and run ``prepare_data``/``setup``. Each case asserts the
error type and that the message names the key, the offending value and the fix (STYLE habit 15:
the sentence itself is written once, where it is raised); docs/reliability.md §3 describes the
error types.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hydra.errors import ConfigCompositionException, MissingConfigException

from src.config.validate import Hardware, validate_run_config
from src.errors import CheckpointError, ConfigError, DataError

REPO = Path(__file__).resolve().parents[2]
GPU_BF16 = Hardware(
    cuda_available=True, cuda_count=2, bf16_supported=True, device_name="NVIDIA H100"
)
GPU_OLD = Hardware(
    cuda_available=True, cuda_count=1, bf16_supported=False, device_name="Tesla V100-SXM2-16GB"
)
CPU = Hardware(cuda_available=False, cuda_count=0, bf16_supported=False)
TASK_FIX = "choose a model of that family, or the task that fits this model"


@dataclass
class Case:
    id: str
    overrides: list[str]
    error: type[BaseException]
    # the key and the offending value, as the message writes them ("model.n_head=5")
    names: tuple[str, ...]
    fix: str  # a stable part of the fix
    hardware: Hardware = field(default_factory=lambda: CPU)


CONFIG_CASES = [
    Case(
        "d_model-not-divisible-by-n_head",
        ["model.n_head=5"],
        ConfigError,
        ("model.d_model=768", "model.n_head=5"),
        "choose n_head among the divisors of d_model",
    ),
    Case(
        "odd-head-dim-with-rope",
        ["model=tiny", "model/position=rope", "model.n_head=64"],
        ConfigError,
        ("model/position=rope", "d_model/n_head = 64/64 = 1"),
        "change model.n_head or model.d_model",
    ),
    Case(
        "n_head-not-divisible-by-n_kv_head",
        ["model=tiny", "+model.n_kv_head=3"],
        ConfigError,
        ("model.n_head=4", "model.n_kv_head=3"),
        "n_kv_head must divide n_head",
    ),
    Case(
        "negative-n_kv_head",
        ["model=tiny", "+model.n_kv_head=-2"],
        ConfigError,  # attention's own check
        ("model.n_kv_head=-2",),
        "use null (= n_head: multi-head), 1 (multi-query) or a divisor of model.n_head=4",
    ),
    Case(
        "dropout-out-of-range",
        ["model.dropout=1.5"],
        ConfigError,
        ("model.dropout=1.5",),
        "must be in [0, 1)",
    ),
    Case(
        "block_size-beyond-learned-table",
        ["block_size=2048"],
        ConfigError,
        ("block_size=2048", "model.max_seq_len=1024"),
        "lower block_size to at most 1024",
    ),
    Case(
        "masked-lm-on-causal-decoder",
        ["objective=masked_lm"],
        ConfigError,
        ("objective=masked_lm", "decoder_only (gpt2_small)"),
        TASK_FIX,
    ),
    Case(
        "causal-lm-on-encoder",
        ["model=bert_base"],
        ConfigError,
        ("objective=causal_lm", "encoder_only (bert_base)"),
        TASK_FIX,
    ),
    Case(
        "translation-data-on-encoder-only",
        ["model=bert_base", "objective=masked_lm", "data=multi30k"],
        ConfigError,
        ("objective=masked_lm", "data=multi30k"),
        "translation pairs fit objective=seq2seq",
    ),
    Case(
        "unknown-position-name",
        ["model.position.name=rotary"],
        ConfigError,
        ("position 'rotary'",),
        "registered positions: {positions}",
    ),
    Case(
        "unknown-ffn-name",
        ["model.ffn.name=gelu2"],
        ConfigError,
        ("ffn 'gelu2'",),
        "registered ffns: {ffns}",
    ),
    Case(
        "unknown-component-key",
        ["+model.position.theta=500"],
        ConfigError,
        ("model.position.theta=500", "model/position=learned"),
        "(accepted: no keys); fix the spelling",
    ),
    Case(
        "unknown-task-name",
        ["objective.name=clm"],
        ConfigError,
        ("objective='clm'",),
        "registered: {objectives}",
    ),
    Case(
        "unknown-data-source",
        ["data.name=wikipedia"],
        DataError,
        ("data source 'wikipedia'",),
        "registered sources: {sources}",
    ),
    Case(
        "unknown-data-key",
        ["+data.shuffle=true"],
        DataError,
        ("data.shuffle=True", "data=embedded"),
        "(accepted: cache_dir, val_fraction, test_fraction, piece_chars); fix the spelling",
    ),
    Case(
        "unknown-optimizer",
        ["optim.name=adagrad"],
        ConfigError,
        ("optim.name='adagrad'",),
        "registered: {optimizers}",
    ),
    Case(
        "unknown-optim-key-appended",
        ["+optim.lrr=0.1"],
        ConfigError,
        ("optim.lrr=0.1",),
        "(accepted: lr, betas, eps, weight_decay, decay_embeddings, fused); fix the spelling",
    ),
    Case(
        "unknown-scheduler-key-appended",
        ["+scheduler.warmup=5"],
        ConfigError,
        ("scheduler.warmup=5",),
        "(accepted: warmup_steps, decay_steps, min_lr); fix the spelling",
    ),
    Case(
        "unknown-task-key-appended",
        ["model=bert_base", "objective=masked_lm", "+objective.mask_probability=0.2"],
        ConfigError,
        ("objective.mask_probability=0.2",),
        "(accepted: name, mask_prob,",
    ),
    Case(
        "unknown-top-level-key-appended",
        ["+batchsize=16"],
        ConfigError,
        ("batchsize=16",),
        "(accepted: batch_size, block_size,",
    ),
    Case(
        "unknown-trainer-argument-appended",
        ["+trainer.max_step=5"],
        ConfigError,
        ("trainer.max_step=5",),
        "(accepted: accelerator, strategy, devices,",
    ),
    Case(
        "missing-mandatory-value",
        ["tokenizer=hf"],
        ConfigError,
        ("tokenizer.path='???'",),
        "pass tokenizer.path=<value> on the command line",
    ),
    Case(
        "trust-remote-code",
        ["+tokenizer.trust_remote_code=true"],
        ConfigError,
        ("tokenizer.trust_remote_code=True",),
        "remove the key",
    ),
    Case(
        "gpu-without-cuda",
        ["trainer=gpu"],
        ConfigError,
        ("trainer.accelerator=gpu",),
        "use trainer=cpu (or trainer.accelerator=cpu)",
    ),
    Case(
        "fsdp-on-cpu",
        ["trainer=fsdp", "trainer.accelerator=cpu", "trainer.precision=32"],
        ConfigError,
        ("trainer.strategy=src.training.strategies.fsdp_strategy", "trainer.accelerator=cpu"),
        "on CPU use trainer=ddp_cpu (DDP) or trainer=cpu",
    ),
    Case(
        "more-devices-than-gpus",
        ["trainer=ddp", "trainer.devices=4"],
        ConfigError,
        ("trainer.devices=4", "only 2 are visible"),
        "use trainer.devices=2 or trainer.devices=auto",
        hardware=GPU_BF16,
    ),
    Case(
        "bf16-on-gpu-without-bf16",
        ["trainer=gpu"],
        ConfigError,
        ("trainer.precision=bf16-mixed", "Tesla V100-SXM2-16GB"),
        "use trainer.precision=16-mixed or trainer.precision=32",
        hardware=GPU_OLD,
    ),
    Case(
        "fp16-on-cpu",
        ["trainer=cpu", "trainer.precision=16-mixed"],
        ConfigError,
        ("trainer.precision=16-mixed",),
        "use trainer.precision=32 or trainer.precision=bf16-mixed",
    ),
    Case(
        "unknown-precision",
        ["trainer.precision=fp8"],
        ConfigError,
        ("trainer.precision='fp8'",),
        "use one of transformer-engine,",
    ),
    Case(
        "zero-devices",
        ["trainer=cpu", "trainer.devices=0"],
        ConfigError,
        ("trainer.devices=0",),
        "at least 1 (a number of devices)",
    ),
    Case(
        "lr-monitor-without-logger",
        ["logger=none"],
        ConfigError,
        ("callbacks.lr_monitor", "logger=none"),
        "choose logger=csv, or drop the callback with ~callbacks.lr_monitor",
    ),
    Case(
        "callback-target-not-importable",
        ["+callbacks.ema._target_=src.callbacks.EMA"],
        ConfigError,
        ("callbacks.ema._target_='src.callbacks.EMA'",),
        "give a dotted path to a class",
    ),
    Case(
        "resume-from-missing-file",
        ["ckpt_path=/nonexistent/checkpoints/last.ckpt"],
        ConfigError,
        ("ckpt_path=/nonexistent/checkpoints/last.ckpt",),
        "set ckpt_path=null to start fresh",
    ),
    Case(
        "resume-from-a-directory",
        ["ckpt_path=/"],
        CheckpointError,
        ("/ is a directory",),
        "give one of its .ckpt files (it holds none)",
    ),
    Case(
        "init-from-missing-file",
        ["init_from=/nonexistent/last.ckpt"],
        CheckpointError,
        ("no checkpoint at /nonexistent/last.ckpt",),
        "<run dir>/checkpoints/ (last.ckpt, best-*.ckpt)",
    ),
    Case(
        "unknown-nonfinite-action",
        ["reliability.nonfinite=ignore"],
        ConfigError,
        ("reliability.nonfinite='ignore'",),
        "use stop (end the run, keep the last good checkpoint) or skip",
    ),
    Case(
        "batch-size-zero",
        ["batch_size=0"],
        ConfigError,
        ("batch_size=0",),
        "a positive number of sequences per device per step",
    ),
    Case(
        "vocab-size-from-typo",
        ["vocab_size_from=tokeniser"],
        ConfigError,
        ("vocab_size_from='tokeniser'",),
        "use tokenizer (model.vocab_size from the tokenizer) or model",
    ),
    # contradictions: an objective and a mask that cannot be meant together; sizes of 0
    Case(
        "causal-lm-with-bidirectional-mask",
        ["model/mask=bidirectional"],
        ConfigError,
        ("objective=causal_lm", "model/mask=bidirectional"),
        "use model/mask=causal, or model/mask=prefix_lm with objective.prefix_length=P",
    ),
    Case(
        "decoder-translation-with-bidirectional-mask",
        [
            "model=tiny",
            "data=multi30k",
            "objective=decoder_translation",
            "model/mask=bidirectional",
        ],
        ConfigError,
        ("objective=decoder_translation", "model/mask=bidirectional"),
        "use model/mask=causal, or model/mask=prefix_lm (the source and <sep> as the prefix)",
    ),
    Case(
        "masked-lm-with-causal-mask",
        ["model=bert_base", "objective=masked_lm", "model/mask=causal"],
        ConfigError,
        ("objective=masked_lm", "model/mask=causal"),
        "use model/mask=bidirectional (BERT)",
    ),
    Case(
        "block-size-zero",
        ["block_size=0"],
        ConfigError,
        ("block_size=0",),
        "a positive number of tokens per training window",
    ),
    Case(
        "log-every-zero-steps",
        ["trainer.log_every_n_steps=0"],
        ConfigError,
        ("trainer.log_every_n_steps=0",),
        "log every this many steps, 1 or more",
    ),
    Case(
        "val-check-interval-zero",
        ["trainer.val_check_interval=0"],
        ConfigError,
        ("trainer.val_check_interval=0",),
        "a number of steps (1 or more) or a fraction of an epoch in (0, 1]",
    ),
    Case(
        "limit-val-batches-above-one",
        ["trainer.limit_val_batches=1.5"],
        ConfigError,
        ("trainer.limit_val_batches=1.5",),
        "a number of batches (0 skips the loop) or a fraction in [0, 1]",
    ),
    Case(
        "negative-gradient-clip",
        ["trainer.gradient_clip_val=-1"],
        ConfigError,
        ("trainer.gradient_clip_val=-1",),
        "0 or more, or null (no clipping)",
    ),
    Case(
        "negative-num-workers",
        ["num_workers=-1"],
        ConfigError,
        ("num_workers=-1",),
        "0 (load in the training process) or a number of worker processes",
    ),
    Case(
        "zero-cpu-threads",
        ["cpu_threads=0"],
        ConfigError,
        ("cpu_threads=0",),
        "a number of torch threads, 1 or more, or null",
    ),
    Case("negative-seed", ["seed=-1"], ConfigError, ("seed=-1",), "an integer seed, 0 or more"),
    # the optimiser and the schedule, by src.optim's dataclasses (their fields are the group's keys)
    Case(
        "negative-lr",
        ["optim.lr=-1"],
        ConfigError,
        ("optim.lr=-1",),
        "a positive learning rate, e.g. optim.lr=6e-4",
    ),
    Case(
        "lr-not-a-number",
        ["optim.lr=abc"],
        ConfigError,
        ("optim.lr='abc'",),
        "a positive learning rate, e.g. optim.lr=6e-4",
    ),
    Case(
        "one-beta",
        ["optim.betas=[0.9]"],
        ConfigError,
        ("optim.betas=[0.9]",),
        "two numbers in [0, 1), e.g. optim.betas=[0.9,0.95]",
    ),
    Case("zero-eps", ["optim.eps=0"], ConfigError, ("optim.eps=0",), "e.g. optim.eps=1e-8"),
    Case(
        "negative-weight-decay",
        ["optim.weight_decay=-0.1"],
        ConfigError,
        ("optim.weight_decay=-0.1",),
        "0 or more, e.g. optim.weight_decay=0.1",
    ),
    Case(
        "fused-typo",
        ["optim.fused=yes"],
        ConfigError,
        ("optim.fused='yes'",),
        "auto (the fused kernel",
    ),
    Case(
        "unknown-scheduler",
        ["scheduler.name=linear"],
        ConfigError,
        ("scheduler.name='linear'",),
        "registered: {schedulers}",
    ),
    Case(
        "negative-warmup",
        ["scheduler.warmup_steps=-1"],
        ConfigError,
        ("scheduler.warmup_steps=-1",),
        "a number of optimizer steps, 0 or more",
    ),
    Case(
        "zero-decay-steps",
        ["scheduler.decay_steps=0"],
        ConfigError,
        ("scheduler.decay_steps=0",),
        "or null (= trainer.max_steps)",
    ),
    Case(
        "min-lr-above-lr",
        ["scheduler.min_lr=1"],
        ConfigError,
        ("scheduler.min_lr=1", "optim.lr=0.0006"),
        "or null (= optim.lr / 10)",
    ),
    Case(
        "cosine-without-horizon",
        ["trainer.max_steps=-1", "trainer.max_epochs=2"],
        ConfigError,
        ("scheduler.decay_steps=None",),
        "set scheduler.decay_steps, or trainer.max_steps",
    ),
]

# Hydra itself (struct mode) rejects these while composing
COMPOSE_CASES = [
    Case(
        "struct-mode-typo",
        ["trainer.max_step=5"],
        ConfigCompositionException,
        ("'trainer.max_step'",),
        "To append to your config use +trainer.max_step=5",
    ),
    Case(
        "unknown-group-option",
        ["model=gpt3"],
        MissingConfigException,
        ("'model/gpt3'",),
        "Available options in 'model':\n\t{models}\n",
    ),
]


def registered() -> dict[str, str]:
    """What the messages list (the registries and conf/model grow as variants are added)."""
    from src.data.sources import SOURCES
    from src.models.components.ffn import FFNS
    from src.models.components.positions import POSITIONS
    from src.objectives.registry import OBJECTIVES
    from src.optim import OPTIMIZERS, SCHEDULES

    models = sorted(p.stem for p in (REPO / "conf" / "model").glob("*.yaml"))
    return {
        "positions": ", ".join(POSITIONS.names()),
        "ffns": ", ".join(FFNS.names()),
        "sources": ", ".join(SOURCES.names()),
        "objectives": ", ".join(OBJECTIVES.names()),
        "optimizers": ", ".join(OPTIMIZERS.in_order()),
        "schedulers": ", ".join(SCHEDULES.in_order()),
        "models": "\n\t".join(models),
    }


def check(err: BaseException, case: Case) -> None:
    """``err`` is the case's type and its message names the key, the value and the fix."""
    text = str(err)
    assert isinstance(err, case.error), f"{case.id}: got {type(err).__name__}: {text}"
    wanted = [part.format(**registered()) for part in (*case.names, case.fix)]
    missing = [part for part in wanted if part not in text]
    assert not missing, f"{case.id}: {missing} not in the message:\n{text}"


@pytest.mark.parametrize("case", CONFIG_CASES, ids=lambda c: c.id)
def test_bad_config(case: Case, compose: Callable[..., Any]) -> None:
    cfg = compose(*case.overrides)
    with pytest.raises(Exception) as info:
        validate_run_config(cfg, hardware=case.hardware)
    check(info.value, case)


@pytest.mark.parametrize("case", COMPOSE_CASES, ids=lambda c: c.id)
def test_bad_composition(case: Case, compose: Callable[..., Any]) -> None:
    with pytest.raises(Exception) as info:
        compose(*case.overrides)
    check(info.value, case)


def test_run_keys_are_the_keys_of_the_train_config_and_its_experiments(
    compose: Callable[..., Any],
) -> None:
    """``RUN_KEYS`` (the top-level keys the validation accepts, declared in code) and conf/train.yaml
    agree, and no experiment adds a top-level key the run would not read."""
    from src.config.validate import RUN_KEYS
    from tests.conftest import CONF_DIR

    assert set(compose().keys()) == RUN_KEYS
    for path in sorted((CONF_DIR / "experiment").glob("*.yaml")):
        if path.stem == "study_common":  # a shared base, composed by the study experiments
            continue
        assert set(compose(f"experiment={path.stem}").keys()) <= RUN_KEYS, path.stem


def test_good_configs_pass(compose: Callable[..., Any]) -> None:
    """The defaults and the quickstart experiment validate (no false alarms)."""
    validate_run_config(compose(), hardware=CPU)
    validate_run_config(compose("experiment=quickstart"), hardware=CPU)
    validate_run_config(compose("trainer=gpu"), hardware=GPU_BF16)
    validate_run_config(compose("trainer=fsdp"), hardware=GPU_BF16)
    validate_run_config(compose("model=bert_base", "objective=masked_lm"), hardware=CPU)


def test_more_cpu_processes_than_cores_warns_with_the_cost(compose: Callable[..., Any]) -> None:
    """An oversubscribed CPU run computes the same, only slower: a warning that states the cost, not an error."""
    two_cores = Hardware(cuda_available=False, cuda_count=0, bf16_supported=False, cpu_cores=2)
    with pytest.warns(UserWarning) as caught:
        validate_run_config(compose("trainer=ddp_cpu", "trainer.devices=4"), hardware=two_cores)
    [text] = [str(w.message) for w in caught if "trainer.devices" in str(w.message)]
    # key, value
    assert text.startswith("trainer.devices=4 starts 4 training processes on 2 usable CPU cores")
    assert "0.5 of a core" in text and "more than 2x as long" in text  # the cost
    assert "use trainer.devices=2 or fewer" in text  # the fix
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # within the cores: silent
        validate_run_config(compose("trainer=ddp_cpu", "trainer.devices=2"), hardware=two_cores)


GENERATION_CASES = [  # (key, value, how the message writes them, a stable part of the fix)
    ("temperature", -1, "temperature=-1", "0 or more (0 = greedy"),
    ("max_new_tokens", -3, "max_new_tokens=-3", "the number of tokens to generate, 0 or more"),
    ("top_k", -1, "top_k=-1", "k >= 1 (null or 0: no top-k filter)"),
    ("top_p", 0.0, "top_p=0.0", "in (0, 1] (null or 1: no top-p filter)"),
    ("top_p", 1.5, "top_p=1.5", "in (0, 1] (null or 1: no top-p filter)"),
    ("num_samples", 0, "num_samples=0", "the number of continuations to sample, 1 or more"),
    ("prompt_file", "/", "prompt_file=/ is a directory", "give a text file (or prompt=...)"),
]


@pytest.mark.parametrize(
    ("key", "value", "names", "fix"),
    GENERATION_CASES,
    ids=[f"{c[0]}={c[1]}" for c in GENERATION_CASES],
)
def test_bad_generation_argument(key: str, value: Any, names: str, fix: str) -> None:
    """src.generate checks its config before loading a model; generate() checks its own arguments."""
    from omegaconf import OmegaConf

    from src.evaluation.sampling import check_args
    from src.models.generation import check_generation_args

    cfg = OmegaConf.load(REPO / "conf" / "generate.yaml")
    for k in ("defaults", "hydra"):
        cfg.pop(k)
    check_args(cfg)  # the defaults pass
    cfg[key] = value
    with pytest.raises(ConfigError) as info:
        check_args(cfg)
    assert names in str(info.value) and fix in str(info.value), str(info.value)
    if key in ("temperature", "max_new_tokens", "top_k", "top_p"):
        args = {"max_new_tokens": 1, "temperature": 1.0, "top_k": None, "top_p": None, key: value}
        with pytest.raises(ConfigError) as direct:
            check_generation_args(**args)
        assert str(direct.value) == str(info.value)  # generate() itself raises the same error


def test_tokenizer_larger_than_model() -> None:
    """Needs the built tokenizer, so it is checked where the spec is resolved against it."""
    from src.config.spec import vocabulary
    from src.data.tokenizers import build_tokenizer

    plain = {
        "vocab_size_from": "model",
        "model": {"vocab_size": 1000},
        "objective": {"name": "causal_lm"},
    }
    with pytest.raises(ConfigError) as info:
        vocabulary(plain, build_tokenizer({"name": "gpt2"}), 0)
    text = str(info.value)  # both sizes, and the two fixes
    assert "tokenizer=gpt2 has 50257 tokens" in text and "model.vocab_size=1000" in text
    assert (
        "raise model.vocab_size to at least 50257" in text and "vocab_size_from=tokenizer" in text
    )


# ---------------------------------------------------------------- data inputs


def _lm(tmp: Path, paths: list[str], block_size: int = 32) -> None:
    from src.data.datamodule import build_datamodule
    from src.data.tokenizers import build_tokenizer

    dm = build_datamodule(
        {"name": "text", "paths": paths, "cache_dir": str(tmp / "cache")},
        build_tokenizer({"name": "char"}),
        block_size=block_size,
        batch_size=2,
        seed=0,
    )
    dm.prepare_tokenizer()
    dm.prepare_data()
    dm.setup("fit")


def _pairs(tmp: Path, lines: dict[str, int]) -> None:
    from src.data.datamodule import build_datamodule
    from src.data.tokenizers import build_tokenizer

    folder = tmp / "m30k"
    folder.mkdir()
    for split in ("train", "val", "test_2016_flickr"):
        for lang in ("en", "de"):
            n = lines.get(f"{split}.{lang}", 4)
            (folder / f"{split}.{lang}.gz").write_bytes(
                gzip.compress("".join(f"s{i}\n" for i in range(n)).encode())
            )
    dm = build_datamodule(
        {"name": "multi30k", "path": str(folder), "cache_dir": str(tmp / "cache")},
        build_tokenizer({"name": "gpt2"}),
        block_size=16,
        batch_size=2,
        seed=0,
    )
    dm.prepare_data()


def _write(tmp: Path, name: str, data: bytes) -> str:
    p = tmp / name
    p.write_bytes(data)
    return str(p)


DATA_CASES: list[tuple[str, Callable[[Path], None], tuple[str, ...], str]] = [
    # (id, trigger, the key or file and the offending value as the message writes them ({t}: tmp_path), the fix)
    (
        "missing-file",
        lambda t: _lm(t, [str(t / "nope.txt")]),
        ("data.paths='{t}/nope.txt'", "no such file"),
        "give existing text files or globs in data.paths",
    ),
    (
        "glob-matches-nothing",
        lambda t: _lm(t, [str(t / "*.md")]),
        ("data.paths=['{t}/*.md']", "matches no files"),
        "e.g. data.paths=[notes/*.txt]",
    ),
    (
        "empty-corpus",
        lambda t: _lm(t, [_write(t, "empty.txt", b"")]),
        ("data=text", "the train split is empty"),
        "give a corpus with text in it",
    ),
    (
        "shorter-than-one-block",
        lambda t: _lm(t, [_write(t, "short.txt", b"hello world, hello\n")]),
        ("data=text", "train split has 15 tokens", "block_size+1 = 33"),
        "use more text or a smaller block_size",
    ),
    (
        "undecodable-bytes",
        lambda t: _lm(t, [_write(t, "latin1.txt", "caf\u00e9 au lait\n".encode("latin-1"))]),
        ("{t}/latin1.txt", "offset 3", "not valid utf-8"),
        "set data.encoding to its encoding",
    ),
    (
        "translation-line-counts-differ",
        lambda t: _pairs(t, {"train.en": 5, "train.de": 4}),
        ("{t}/m30k/train.en.gz has 5 lines", "{t}/m30k/train.de.gz has 4"),
        "must align line by line",
    ),
]


@pytest.mark.parametrize("name,make,names,fix", DATA_CASES, ids=[c[0] for c in DATA_CASES])
def test_bad_data(
    name: str, make: Callable[[Path], None], names: tuple[str, ...], fix: str, tmp_path: Path
) -> None:
    with pytest.raises(DataError) as info:
        make(tmp_path)
    text = str(info.value)
    missing = [part for part in (*names, fix) if part.format(t=tmp_path) not in text]
    assert not missing, f"{name}: {missing} not in the message:\n{text}"


def test_token_id_beyond_the_vocabulary_deep_in_a_cache(tmp_path: Path) -> None:
    """One bad id deep in a prepared token file is found when the data module sets up, not at the
    batch that holds it: the error names the file, the id and its position."""
    import numpy as np

    from src.data.datamodule import build_datamodule
    from src.data.tokenizers import build_tokenizer

    corpus = _write(tmp_path, "corpus.txt", b"hello world, the cat sat on the mat.\n" * 40)

    def datamodule() -> Any:  # a fresh char tokenizer each time finds the same cache entry
        dm = build_datamodule(
            {"name": "text", "paths": [corpus], "cache_dir": str(tmp_path / "cache")},
            build_tokenizer({"name": "char"}),
            block_size=16,
            batch_size=2,
            seed=0,
        )
        dm.prepare_tokenizer()
        dm.prepare_data()
        return dm

    dm = datamodule()
    dm.setup("fit")  # a clean cache passes
    train = dm.token_dir / "train.bin"
    ids = np.memmap(train, dtype=np.uint16, mode="r+")
    ids[1000] = 999  # far beyond the 19 characters of this vocabulary
    ids.flush()
    del ids
    dm = datamodule()
    with pytest.raises(DataError) as info:
        dm.setup("fit")
    text = str(info.value)  # the file, the id and where it is, the bound, the fix
    assert text.startswith(f"{train}: token id 999 at position 1000 (byte offset 2000, uint16)")
    assert f"(tokenizer=char has {dm.tokenizer.vocab_size} ids)" in text
    assert "python -m src.prepare data=<name> tokenizer=<name>" in text
    dm = datamodule()
    dm.vocab_size = 1000  # the run sets model.vocab_size (src.training.setup.build_run): 999 fits
    dm.setup("fit")
    dm.vocab_size = 999
    with pytest.raises(
        DataError, match=r"token id 999 at position 1000 .* \(model.vocab_size=999\)"
    ):
        dm.setup("fit")


@pytest.mark.parametrize(
    ("overrides", "typo", "suggestion"),
    [
        (["+batchsize=16"], "batchsize=16", "did you mean batch_size"),
        (["+model.norm_placment=post"], "norm_placment", "did you mean model.norm_placement?"),
        (
            ["model=bert_base", "objective=masked_lm", "+objective.mask_probability=0.2"],
            "objective.mask_probability",
            "did you mean objective.mask_prob?",
        ),
        (["+optim.lrr=0.1"], "optim.lrr=0.1", "did you mean optim.lr?"),
        (["+scheduler.warmup=5"], "scheduler.warmup=5", "did you mean scheduler.warmup_steps?"),
        (["+trainer.max_step=5"], "trainer.max_step=5", "did you mean trainer.max_steps"),
        (["+logger.csv.nme=x"], "logger.csv.nme='x'", "did you mean logger.csv.name?"),
        (
            ["+reliability.nonfinit=skip"],
            "reliability.nonfinit='skip'",
            "did you mean reliability.nonfinite?",
        ),
        (
            ["model/position=rope", "+model.position.thta=500"],
            "thta",
            "did you mean model.position.theta?",
        ),
        (["+data.val_fractoin=0.2"], "val_fractoin", "did you mean data.val_fraction"),
    ],
)
def test_a_misspelt_key_gets_the_closest_accepted_name(
    overrides: list[str], typo: str, suggestion: str, compose: Callable[..., Any]
) -> None:
    with pytest.raises(Exception) as info:
        validate_run_config(compose(*overrides), hardware=CPU)
    assert typo in str(info.value) and suggestion in str(info.value)


def test_no_suggestion_when_nothing_is_close() -> None:
    from src.errors import did_you_mean

    assert did_you_mean("zzzz", ["batch_size", "block_size"]) == ""
    assert (
        did_you_mean(["norm_placment"], ["norm_placement", "norm"], "model.")
        == " (did you mean model.norm_placement?)"
    )
