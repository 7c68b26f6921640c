"""Table-driven: bad configurations and bad data inputs, each with the exact error it gets.

Config cases go through Hydra composition of conf/train.yaml and
``src.training.harden.validate_run_config`` (which ``build_run`` calls before anything heavy);
hardware-dependent cases pass a ``Hardware`` so they do not depend on the machine. Data cases
build the datamodule the way a run does and run ``prepare_data``/``setup``. The messages are
the catalogue of docs/reliability.md.
"""
from __future__ import annotations

import gzip
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hydra.errors import ConfigCompositionException, MissingConfigException

from src.data.errors import DataError
from src.optim import OptimConfigError
from src.models.config import ConfigError
from src.registry import RegistryError
from src.config.validate import Hardware, validate_run_config
from src.errors import CheckpointError, RunConfigError
from tests.reliability.conftest import REPO
from src.objectives.base import TaskError

GPU_BF16 = Hardware(cuda_available=True, cuda_count=2, bf16_supported=True, device_name="NVIDIA H100")
GPU_OLD = Hardware(cuda_available=True, cuda_count=1, bf16_supported=False, device_name="Tesla V100-SXM2-16GB")
CPU = Hardware(cuda_available=False, cuda_count=0, bf16_supported=False)
TASK_HINT = ("choose a model of that family, or the task that fits this model: causal_lm / decoder_translation "
             "(decoder_only), masked_lm (encoder_only), seq2seq (encoder_decoder)")


@dataclass
class Case:
    id: str
    overrides: list[str]
    error: type[BaseException]
    message: str  # exact text, or (exact=False) a stable substring naming key, value and fix
    exact: bool = True
    hardware: Hardware = field(default_factory=lambda: CPU)


CONFIG_CASES = [
    Case("d_model-not-divisible-by-n_head", ["model.n_head=5"], ConfigError,
         "model.d_model=768 is not divisible by model.n_head=5; choose n_head among the divisors of d_model "
         "(e.g. 12 for 64-dim heads)"),
    Case("odd-head-dim-with-rope", ["model=tiny", "model/position=rope", "model.n_head=64"], ConfigError,
         "model/position=rope needs an even head dimension, but d_model/n_head = 64/64 = 1; change model.n_head or "
         "model.d_model"),
    Case("n_head-not-divisible-by-n_kv_head", ["model=tiny", "+model.n_kv_head=3"], ConfigError,
         "model.n_head=4 is not divisible by model.n_kv_head=3; n_kv_head must divide n_head (n_kv_head=1 is "
         "multi-query, n_kv_head=n_head is multi-head)"),
    Case("negative-n_kv_head", ["model=tiny", "+model.n_kv_head=-2"], ConfigError,  # attention's own check
         "model.n_kv_head=-2 is invalid: use null (= n_head: multi-head), 1 (multi-query) or a divisor of "
         "model.n_head=4"),
    Case("dropout-out-of-range", ["model.dropout=1.5"], ConfigError, "model.dropout=1.5 must be in [0, 1)"),
    Case("block_size-beyond-learned-table", ["block_size=2048"], RunConfigError,
         "block_size=2048 exceeds model.max_seq_len=1024, the rows of the learned position table "
         "(model/position=learned); lower block_size to at most 1024, raise model.max_seq_len, or use a relative "
         "scheme (model/position=rope)"),
    Case("masked-lm-on-causal-decoder", ["task=masked_lm"], TaskError,
         f"task=masked_lm needs model.family in ['encoder_only'], but the model is decoder_only (gpt2_small); {TASK_HINT}"),
    Case("causal-lm-on-encoder", ["model=bert_base"], TaskError,
         f"task=causal_lm needs model.family in ['decoder_only'], but the model is encoder_only (bert_base); {TASK_HINT}"),
    Case("translation-data-on-encoder-only", ["model=bert_base", "task=masked_lm", "data=multi30k"], TaskError,
         "task=masked_lm cannot train on data=multi30k, which yields pairs batches; translation pairs fit task=seq2seq "
         "(encoder_decoder) or task=decoder_translation (decoder_only)"),
    Case("unknown-position-name", ["model.position.name=rotary"], RegistryError,
         "unknown position 'rotary'; registered positions: {positions}. Register a new one "
         "with @POSITIONS.register('rotary') and add conf/model/position/rotary.yaml"),
    Case("unknown-ffn-name", ["model.ffn.name=gelu2"], RegistryError,
         "unknown ffn 'gelu2'; registered ffns: {ffns}. Register a new one with "
         "@FFNS.register('gelu2') and add conf/model/ffn/gelu2.yaml"),
    Case("unknown-component-key", ["+model.position.theta=500"], RegistryError,
         "position 'learned' got unknown key(s) ['theta']; it accepts: (no keys)"),
    Case("unknown-task-name", ["task.name=clm"], RunConfigError,
         "task='clm' is not known; registered: causal_lm, decoder_translation, masked_lm, seq2seq "
         "(conf/task/<name>.yaml picks one)"),
    Case("unknown-data-source", ["data.name=wikipedia"], DataError,
         "unknown data source 'wikipedia'; registered sources: bin, embedded, hf, multi30k, openwebtext, text, "
         "tinyshakespeare (data=<name> picks conf/data/<name>.yaml)"),
    Case("unknown-data-key", ["+data.shuffle=true"], DataError,
         "data=embedded got unknown key(s) ['shuffle']; it accepts: cache_dir, val_fraction, test_fraction, piece_chars"),
    Case("unknown-optimizer", ["optim.name=sgd"], OptimConfigError, "optim.name='sgd' is not known; registered: adamw"),
    Case("unknown-task-key-appended", ["model=bert_base", "task=masked_lm", "+task.mask_probability=0.2"],
         RunConfigError,
         "task.mask_probability=0.2 is not a key of task=masked_lm (conf/task/masked_lm.yaml) (accepted: name, "
         "mask_prob, replace_mask, replace_random, mask_token_id); fix the spelling or remove the override"),
    Case("unknown-top-level-key-appended", ["+batchsize=16"], RunConfigError,
         "batchsize=16 is not a key of conf/train.yaml (accepted: batch_size, block_size,", exact=False),
    Case("unknown-trainer-argument-appended", ["+trainer.max_step=5"], RunConfigError,
         "trainer.max_step=5 is not a key of lightning.pytorch.Trainer (accepted: accelerator, strategy, devices,",
         exact=False),
    Case("missing-mandatory-value", ["data=text"], RunConfigError,
         "data.paths='???' is invalid: it is required and has no default; pass data.paths=<value> on the command line"),
    Case("trust-remote-code", ["+tokenizer.trust_remote_code=true"], RunConfigError,
         "tokenizer.trust_remote_code=True: remote code from the Hub is never run here; remove the key (loading uses "
         "trust_remote_code=False) and use a model/tokenizer/dataset that ships plain config and weights"),
    Case("gpu-without-cuda", ["trainer=gpu"], RunConfigError,
         "trainer.accelerator=gpu but no CUDA GPU is visible (torch.cuda.is_available() is False); use trainer=cpu "
         "(or trainer.accelerator=cpu), or run on a GPU machine"),
    Case("fsdp-on-cpu", ["trainer=fsdp", "trainer.accelerator=cpu", "trainer.precision=32"], RunConfigError,
         "trainer.strategy=src.training.strategies.fsdp_strategy (FSDP) needs CUDA GPUs, but trainer.accelerator=cpu; "
         "on CPU use trainer=ddp_cpu (DDP) or trainer=cpu"),
    Case("more-devices-than-gpus", ["trainer=ddp", "trainer.devices=4"], RunConfigError,
         "trainer.devices=4 asks for 4 GPU(s) but only 2 are visible; use trainer.devices=2 or trainer.devices=auto",
         hardware=GPU_BF16),
    Case("bf16-on-gpu-without-bf16", ["trainer=gpu"], RunConfigError,
         "trainer.precision=bf16-mixed needs bfloat16, which this GPU (Tesla V100-SXM2-16GB) does not support "
         "(torch.cuda.is_bf16_supported() is False); use trainer.precision=16-mixed or trainer.precision=32",
         hardware=GPU_OLD),
    Case("fp16-on-cpu", ["trainer=cpu", "trainer.precision=16-mixed"], RunConfigError,
         "trainer.precision=16-mixed (float16) runs on GPUs only and Lightning would silently switch to bf16-mixed on "
         "CPU; use trainer.precision=32 or trainer.precision=bf16-mixed"),
    Case("unknown-precision", ["trainer.precision=fp8"], RunConfigError,
         "trainer.precision='fp8' is invalid: use one of transformer-engine,", exact=False),
    Case("zero-devices", ["trainer=cpu", "trainer.devices=0"], RunConfigError,
         "trainer.devices=0 is invalid: at least 1 (a number of devices), a list of GPU indices, -1 or auto"),
    Case("lr-monitor-without-logger", ["logger=none"], RunConfigError,
         "callbacks.lr_monitor (lightning.pytorch.callbacks.LearningRateMonitor) needs a logger, but logger=none "
         "configures none; choose logger=csv, or drop the callback with ~callbacks.lr_monitor"),
    Case("callback-target-not-importable", ["+callbacks.ema._target_=src.callbacks.EMA"], RunConfigError,
         "callbacks.ema._target_='src.callbacks.EMA' is invalid: it cannot be imported", exact=False),
    Case("resume-from-missing-file", ["ckpt_path=/nonexistent/checkpoints/last.ckpt"], RunConfigError,
         "ckpt_path=/nonexistent/checkpoints/last.ckpt: no such file; resume from <run dir>/checkpoints/last.ckpt of "
         "an earlier run, or set ckpt_path=null to start fresh"),
    Case("resume-from-a-directory", ["ckpt_path=/"], CheckpointError,
         "/ is a directory, not a checkpoint file; give one of its .ckpt files (it holds none). Sharded FSDP "
         "checkpoints are directories: train with trainer.strategy.state_dict_type=full to get one file"),
    Case("init-from-missing-file", ["init_from=/nonexistent/last.ckpt"], CheckpointError,
         "no checkpoint at /nonexistent/last.ckpt; run directories keep them in <run dir>/checkpoints/ (last.ckpt, "
         "best-*.ckpt)"),
    Case("unknown-nonfinite-action", ["reliability.nonfinite=ignore"], RunConfigError,
         "reliability.nonfinite='ignore' is invalid: use stop (end the run, keep the last good checkpoint) or skip "
         "(drop that update)"),
    Case("batch-size-zero", ["batch_size=0"], RunConfigError,
         "batch_size=0 is invalid: a positive number of sequences per device per step"),
    Case("vocab-size-from-typo", ["vocab_size_from=tokeniser"], RunConfigError,
         "vocab_size_from='tokeniser' is invalid: use tokenizer (model.vocab_size from the tokenizer) or model "
         "(keep model.vocab_size)"),
    # contradictions: an objective and a mask that cannot be meant together; sizes of 0
    Case("causal-lm-with-bidirectional-mask", ["model/mask=bidirectional"], TaskError,
         "task=causal_lm predicts each token from the tokens before it, but model/mask=bidirectional lets every "
         "position see the tokens after it, its targets included (the loss would fall without learning to predict); "
         "use model/mask=causal, or model/mask=prefix_lm with task.prefix_length=P for a prefix LM"),
    Case("decoder-translation-with-bidirectional-mask", ["model=tiny", "data=multi30k", "task=decoder_translation",
                                                         "model/mask=bidirectional"], TaskError,
         "task=decoder_translation predicts each token from the tokens before it, but model/mask=bidirectional lets "
         "every position see the tokens after it, its targets included (the loss would fall without learning to "
         "predict); use model/mask=causal, or model/mask=prefix_lm (the source and <sep> as the prefix)"),
    Case("masked-lm-with-causal-mask", ["model=bert_base", "task=masked_lm", "model/mask=causal"], TaskError,
         "task=masked_lm predicts masked tokens from both sides, but model/mask=causal hides the tokens after each "
         "position; use model/mask=bidirectional (BERT)"),
    Case("block-size-zero", ["block_size=0"], RunConfigError,
         "block_size=0 is invalid: a positive number of tokens per training window, at most model.max_seq_len"),
    Case("log-every-zero-steps", ["trainer.log_every_n_steps=0"], RunConfigError,
         "trainer.log_every_n_steps=0 is invalid: log every this many steps, 1 or more"),
    Case("val-check-interval-zero", ["trainer.val_check_interval=0"], RunConfigError,
         "trainer.val_check_interval=0 is invalid: a number of steps (1 or more) or a fraction of an epoch in (0, 1]"),
    Case("limit-val-batches-above-one", ["trainer.limit_val_batches=1.5"], RunConfigError,
         "trainer.limit_val_batches=1.5 is invalid: a number of batches (0 skips the loop) or a fraction in [0, 1]"),
    Case("negative-gradient-clip", ["trainer.gradient_clip_val=-1"], RunConfigError,
         "trainer.gradient_clip_val=-1 is invalid: a gradient norm (or value) limit, 0 or more, or null (no clipping)"),
    Case("negative-num-workers", ["num_workers=-1"], RunConfigError,
         "num_workers=-1 is invalid: 0 (load in the training process) or a number of worker processes"),
    Case("zero-cpu-threads", ["cpu_threads=0"], RunConfigError,
         "cpu_threads=0 is invalid: a number of torch threads, 1 or more, or null (torch's default)"),
    Case("negative-seed", ["seed=-1"], RunConfigError, "seed=-1 is invalid: an integer seed, 0 or more"),
    # the optimiser and the schedule, by src.optim's own checks
    Case("negative-lr", ["optim.lr=-1"], OptimConfigError,
         "optim.lr=-1 is invalid: a positive learning rate, e.g. optim.lr=6e-4"),
    Case("lr-not-a-number", ["optim.lr=abc"], OptimConfigError,
         "optim.lr='abc' is invalid: a positive learning rate, e.g. optim.lr=6e-4"),
    Case("one-beta", ["optim.betas=[0.9]"], OptimConfigError,
         "optim.betas=[0.9] is invalid: two numbers in [0, 1), e.g. optim.betas=[0.9,0.95]"),
    Case("zero-eps", ["optim.eps=0"], OptimConfigError, "optim.eps=0 is invalid: a small positive number, e.g. optim.eps=1e-8"),
    Case("negative-weight-decay", ["optim.weight_decay=-0.1"], OptimConfigError,
         "optim.weight_decay=-0.1 is invalid: 0 or more, e.g. optim.weight_decay=0.1"),
    Case("fused-typo", ["optim.fused=yes"], OptimConfigError,
         "optim.fused='yes' is invalid: auto (the fused kernel where PyTorch has one: CUDA, CPU), true or false"),
    Case("unknown-scheduler", ["scheduler.name=linear"], OptimConfigError,
         "scheduler.name='linear' is not known; registered: cosine, constant, none"),
    Case("negative-warmup", ["scheduler.warmup_steps=-1"], OptimConfigError,
         "scheduler.warmup_steps=-1 is invalid: a number of optimizer steps, 0 or more"),
    Case("zero-decay-steps", ["scheduler.decay_steps=0"], OptimConfigError,
         "scheduler.decay_steps=0 is invalid: a positive number of optimizer steps, or null (= trainer.max_steps)"),
    Case("min-lr-above-lr", ["scheduler.min_lr=1"], OptimConfigError,
         "scheduler.min_lr=1 is invalid: in [0, optim.lr=0.0006], or null (= optim.lr / 10)"),
    Case("cosine-without-horizon", ["trainer.max_steps=-1", "trainer.max_epochs=2"], OptimConfigError,
         "scheduler.decay_steps=None is invalid: scheduler=cosine needs a horizon: set scheduler.decay_steps, or "
         "trainer.max_steps (it defaults to it)"),
]

# Hydra itself (struct mode) rejects these while composing
COMPOSE_CASES = [
    Case("struct-mode-typo", ["trainer.max_step=5"], ConfigCompositionException,
         "Could not override 'trainer.max_step'.\nTo append to your config use +trainer.max_step=5"),
    Case("unknown-group-option", ["model=gpt3"], MissingConfigException,
         "In 'train': Could not find 'model/gpt3'\n\nAvailable options in 'model':\n\t{models}\n", exact=False),
]


def registered() -> dict[str, str]:
    """What the messages list (the registries and conf/model grow as variants are added)."""
    from src.models.components.ffn import FFNS
    from src.models.components.positions import POSITIONS

    models = sorted(p.stem for p in (REPO / "conf" / "model").glob("*.yaml"))
    return {"positions": ", ".join(POSITIONS.names()), "ffns": ", ".join(FFNS.names()), "models": "\n\t".join(models)}


def check(err: BaseException, case: Case) -> None:
    text = str(err)
    assert isinstance(err, case.error), f"{case.id}: got {type(err).__name__}: {text}"
    want = case.message.format(**registered())
    if case.exact:
        assert text == want, f"{case.id}:\n got: {text}\nwant: {want}"
    else:
        assert want in text, f"{case.id}:\n got: {text}\nwant (substring): {want}"


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


def test_good_configs_pass(compose: Callable[..., Any]) -> None:
    """The defaults and the quickstart experiment validate (no false alarms)."""
    validate_run_config(compose(), hardware=CPU)
    validate_run_config(compose("experiment=quickstart"), hardware=CPU)
    validate_run_config(compose("trainer=gpu"), hardware=GPU_BF16)
    validate_run_config(compose("trainer=fsdp"), hardware=GPU_BF16)
    validate_run_config(compose("model=bert_base", "task=masked_lm"), hardware=CPU)


def test_more_cpu_processes_than_cores_warns_with_the_cost(compose: Callable[..., Any]) -> None:
    """An oversubscribed CPU run computes the same, only slower: a warning that states the cost, not an error."""
    two_cores = Hardware(cuda_available=False, cuda_count=0, bf16_supported=False, cpu_cores=2)
    with pytest.warns(UserWarning) as caught:
        validate_run_config(compose("trainer=ddp_cpu", "trainer.devices=4"), hardware=two_cores)
    assert [str(w.message) for w in caught if "trainer.devices" in str(w.message)] == [
        "trainer.devices=4 starts 4 training processes on 2 usable CPU cores: each gets 0.5 of a core and every step "
        "waits for the slowest, so expect each step to take more than 2x as long as with trainer.devices=2 "
        "(docs/reliability.md: 4 processes on 2 cores ran 6.6x slower); use trainer.devices=2 or fewer (trainer=cpu "
        "for one process)"]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # within the cores: silent
        validate_run_config(compose("trainer=ddp_cpu", "trainer.devices=2"), hardware=two_cores)


GENERATION_CASES = [
    ("temperature", -1, "temperature=-1 is invalid: 0 or more (0 = greedy; below 1 sharper, above 1 flatter)"),
    ("max_new_tokens", -3, "max_new_tokens=-3 is invalid: the number of tokens to generate, 0 or more"),
    ("top_k", -1, "top_k=-1 is invalid: sample among the k most likely tokens, k >= 1 (null or 0: no top-k filter)"),
    ("top_p", 0.0, "top_p=0.0 is invalid: the nucleus mass, in (0, 1] (null or 1: no top-p filter)"),
    ("top_p", 1.5, "top_p=1.5 is invalid: the nucleus mass, in (0, 1] (null or 1: no top-p filter)"),
    ("num_samples", 0, "num_samples=0 is invalid: the number of continuations to sample, 1 or more"),
    ("prompt_file", "/", "prompt_file=/ is a directory, not a file; give a text file (or prompt=...)"),
]


@pytest.mark.parametrize(("key", "value", "message"), GENERATION_CASES, ids=[f"{c[0]}={c[1]}" for c in GENERATION_CASES])
def test_bad_generation_argument(key: str, value: Any, message: str) -> None:
    """src.generate checks its config before loading a model; generate() checks its own arguments."""
    from omegaconf import OmegaConf

    from src.generate import check_args
    from src.models.generation import GenerationError, check_generation_args

    cfg = OmegaConf.load(REPO / "conf" / "generate.yaml")
    for k in ("defaults", "hydra"):
        cfg.pop(k)
    check_args(cfg)  # the defaults pass
    cfg[key] = value
    with pytest.raises(GenerationError) as info:
        check_args(cfg)
    assert str(info.value) == message
    if key in ("temperature", "max_new_tokens", "top_k", "top_p"):
        args = {"max_new_tokens": 1, "temperature": 1.0, "top_k": None, "top_p": None, key: value}
        with pytest.raises(GenerationError, match=re.escape(message)):
            check_generation_args(**args)


def test_tokenizer_larger_than_model() -> None:
    """Needs the built tokenizer, so it is checked in ``resolve_vocab`` (src.training.setup)."""
    from src.data.tokenizers import build_tokenizer
    from src.training.setup import SetupError, resolve_vocab

    plain = {"vocab_size_from": "model", "model": {"vocab_size": 1000}, "task": {"name": "causal_lm"}}
    with pytest.raises(SetupError) as info:
        resolve_vocab(plain, build_tokenizer({"name": "gpt2"}), 0)
    assert str(info.value) == ("tokenizer=gpt2 has 50257 tokens, more than model.vocab_size=1000; raise "
                               "model.vocab_size to at least 50257, or set vocab_size_from=tokenizer")


# ---------------------------------------------------------------- data inputs


def _lm(tmp: Path, paths: list[str], block_size: int = 32) -> None:
    from src.data.datamodule import build_datamodule
    from src.data.tokenizers import build_tokenizer

    dm = build_datamodule({"name": "text", "paths": paths, "cache_dir": str(tmp / "cache")},
                          build_tokenizer({"name": "char"}), block_size=block_size, batch_size=2, seed=0)
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
            (folder / f"{split}.{lang}.gz").write_bytes(gzip.compress("".join(f"s{i}\n" for i in range(n)).encode()))
    dm = build_datamodule({"name": "multi30k", "path": str(folder), "cache_dir": str(tmp / "cache")},
                          build_tokenizer({"name": "gpt2"}), block_size=16, batch_size=2, seed=0)
    dm.prepare_data()


def _write(tmp: Path, name: str, data: bytes) -> str:
    p = tmp / name
    p.write_bytes(data)
    return str(p)


DATA_CASES: list[tuple[str, Callable[[Path], None], str]] = [
    ("missing-file", lambda t: _lm(t, [str(t / "nope.txt")]),
     "data.paths='{t}/nope.txt': no such file. give existing text files or globs in data.paths"),
    ("glob-matches-nothing", lambda t: _lm(t, [str(t / "*.md")]),
     "data.paths=['{t}/*.md'] matches no files; give existing text files or globs, e.g. data.paths=[notes/*.txt]"),
    ("empty-corpus", lambda t: _lm(t, [_write(t, "empty.txt", b"")]),
     "data=text: the train split is empty (no text); give a corpus with text in it"),
    ("shorter-than-one-block", lambda t: _lm(t, [_write(t, "short.txt", b"hello world, hello\n")]),
     "data=text: the train split has 15 tokens but one window needs block_size+1 = 33; use more text or a smaller "
     "block_size (model.max_seq_len)"),
    ("undecodable-bytes", lambda t: _lm(t, [_write(t, "latin1.txt", "caf\u00e9 au lait\n".encode("latin-1"))]),
     "{t}/latin1.txt: bytes at offset 3 are not valid utf-8 (invalid continuation byte); convert the file to utf-8 "
     "or set data.encoding to its encoding"),
    ("translation-line-counts-differ", lambda t: _pairs(t, {"train.en": 5, "train.de": 4}),
     "{t}/m30k/train.en.gz has 5 lines but {t}/m30k/train.de.gz has 4; translation files must align line by line"),
]


@pytest.mark.parametrize("name,make,message", DATA_CASES, ids=[c[0] for c in DATA_CASES])
def test_bad_data(name: str, make: Callable[[Path], None], message: str, tmp_path: Path) -> None:
    with pytest.raises(DataError) as info:
        make(tmp_path)
    assert str(info.value) == message.format(t=tmp_path)


def test_token_id_beyond_the_vocabulary_deep_in_a_cache(tmp_path: Path) -> None:
    """One bad id deep in a prepared token file is found when the data module sets up, not at the
    batch that holds it: the error names the file, the id and its position."""
    import numpy as np

    from src.data.datamodule import build_datamodule
    from src.data.tokenizers import build_tokenizer

    corpus = _write(tmp_path, "corpus.txt", b"hello world, the cat sat on the mat.\n" * 40)

    def datamodule() -> Any:  # a fresh char tokenizer each time finds the same cache entry
        dm = build_datamodule({"name": "text", "paths": [corpus], "cache_dir": str(tmp_path / "cache")},
                              build_tokenizer({"name": "char"}), block_size=16, batch_size=2, seed=0)
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
    assert str(info.value) == (
        f"{train}: token id 999 at position 1000 (byte offset 2000, uint16) is outside the vocabulary (tokenizer=char "
        f"has {dm.tokenizer.vocab_size} ids); the file was written with another tokenizer, or is damaged. Prepare it again with "
        f"this run's tokenizer (python -m src.prepare data=<name> tokenizer=<name>), or train with the tokenizer it "
        f"was written with")
    dm = datamodule()
    dm.vocab_size = 1000  # the run sets model.vocab_size (src.training.setup.build_run): 999 fits
    dm.setup("fit")
    dm.vocab_size = 999
    with pytest.raises(DataError, match=r"token id 999 at position 1000 .* \(model.vocab_size=999\)"):
        dm.setup("fit")


def test_docs_list_every_message() -> None:
    """docs/reliability.md's catalogue holds every template of both message tables and the exact text
    of every case above (those that list registered names are checked against the registries only)."""
    from src.data.errors import MESSAGES as DATA_MESSAGES
    from src.errors import MESSAGES

    docs = (REPO / "docs" / "reliability.md").read_text()
    missing = [code for code, text in (*MESSAGES.items(), *DATA_MESSAGES.items()) if text not in docs]
    assert not missing, f"templates not in docs/reliability.md: {missing}"
    cases = [c.message for c in (*CONFIG_CASES, *COMPOSE_CASES) if c.exact and "{" not in c.message]
    cases += [m for _, _, m in GENERATION_CASES]
    assert not [m for m in cases if m not in docs], "exact texts not in docs/reliability.md"
