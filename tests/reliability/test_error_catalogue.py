"""Table-driven: bad configurations and bad data inputs, each with the exact error it gets.

Config cases go through Hydra composition of conf/train.yaml and
``src.reliability.validate_run_config`` (which ``build_run`` calls before anything heavy);
hardware-dependent cases pass a ``Hardware`` so they do not depend on the machine. Data cases
build the datamodule the way a run does and run ``prepare_data``/``setup``. The messages are
the catalogue of docs/reliability.md.
"""
from __future__ import annotations

import gzip
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hydra.errors import ConfigCompositionException, MissingConfigException

from src.data.errors import DataError
from src.models.config import ConfigError
from src.registry import RegistryError
from src.reliability import Hardware, RunConfigError, validate_run_config
from src.tasks.base import TaskError

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
         "unknown position 'rotary'; registered positions: alibi, learned, none, rope, sinusoidal. Register a new one "
         "with @POSITIONS.register('rotary') and add conf/model/position/rotary.yaml"),
    Case("unknown-ffn-name", ["model.ffn.name=geglu"], RegistryError,
         "unknown ffn 'geglu'; registered ffns: gelu, relu, silu, swiglu. Register a new one with "
         "@FFNS.register('geglu') and add conf/model/ffn/geglu.yaml"),
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
    Case("unknown-optimizer", ["optim.name=sgd"], RunConfigError, "optim.name='sgd' is not known; registered: adamw"),
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
    Case("unknown-nonfinite-action", ["reliability.nonfinite=ignore"], RunConfigError,
         "reliability.nonfinite='ignore' is invalid: use stop (end the run, keep the last good checkpoint) or skip "
         "(drop that update)"),
    Case("batch-size-zero", ["batch_size=0"], RunConfigError,
         "batch_size=0 is invalid: a positive number of sequences per device per step"),
    Case("vocab-size-from-typo", ["vocab_size_from=tokeniser"], RunConfigError,
         "vocab_size_from='tokeniser' is invalid: use tokenizer (model.vocab_size from the tokenizer) or model "
         "(keep model.vocab_size)"),
]

# Hydra itself (struct mode) rejects these while composing
COMPOSE_CASES = [
    Case("struct-mode-typo", ["trainer.max_step=5"], ConfigCompositionException,
         "Could not override 'trainer.max_step'.\nTo append to your config use +trainer.max_step=5"),
    Case("unknown-group-option", ["model=gpt3"], MissingConfigException,
         "In 'train': Could not find 'model/gpt3'\n\nAvailable options in 'model':\n\tbert_base\n\tgpt2_large\n\t"
         "gpt2_medium\n\tgpt2_small\n\tgpt2_xl\n\tllama_small\n\ttiny\n\ttransformer_base\n", exact=False),
]


def check(err: BaseException, case: Case) -> None:
    text = str(err)
    assert isinstance(err, case.error), f"{case.id}: got {type(err).__name__}: {text}"
    if case.exact:
        assert text == case.message, f"{case.id}:\n got: {text}\nwant: {case.message}"
    else:
        assert case.message in text, f"{case.id}:\n got: {text}\nwant (substring): {case.message}"


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
     "data=text: the train split has 17 tokens but one window needs block_size+1 = 33; use more text or a smaller "
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
