"""Every error message the reliability layer raises, in one table (like ``src.data.errors``).

Each message names the config key, the offending value and the fix. Code raises
``RunConfigError(code, **fields)`` / ``CheckpointError(code, **fields)`` /
``NonFiniteLossError(code, **fields)`` / ``Preempted(code, **fields)``; the text is ``MESSAGES[code].format(**fields)``, so a
test can assert the exact text of every error from this table alone. The catalogue of all
errors (model, data, task and these) is in docs/reliability.md.
"""
from __future__ import annotations

from typing import Any

MESSAGES: dict[str, str] = {
    # ---------------------------------------------------------------- run config (RunConfigError)
    "unknown_key": "{key}={value!r} is not a key of {where} (accepted: {accepted}); fix the spelling or remove the override",
    "unknown_name": "{key}={value!r} is not known; registered: {names}",
    "bad_value": "{key}={value!r} is invalid: {fix}",
    "trust_remote_code": (
        "{key}={value!r}: remote code from the Hub is never run here; remove the key (loading uses "
        "trust_remote_code=False) and use a model/tokenizer/dataset that ships plain config and weights"
    ),
    "block_size_exceeds_table": (
        "block_size={block_size} exceeds model.max_seq_len={max_seq_len}, the rows of the learned position table "
        "(model/position={position}); lower block_size to at most {max_seq_len}, raise model.max_seq_len, "
        "or use a relative scheme (model/position=rope)"
    ),
    "no_cuda": (
        "trainer.accelerator={value} but no CUDA GPU is visible (torch.cuda.is_available() is False); "
        "use trainer=cpu (or trainer.accelerator=cpu), or run on a GPU machine"
    ),
    "fsdp_needs_gpu": (
        "trainer.strategy={strategy} (FSDP) needs CUDA GPUs, but {why}; on CPU use trainer=ddp_cpu (DDP) or trainer=cpu"
    ),
    "too_many_devices": (
        "trainer.devices={value} asks for {requested} GPU(s) but only {available} are visible; "
        "use trainer.devices={available_fix} or trainer.devices=auto"
    ),
    "cpu_oversubscribed": (  # a warning: the run computes the same, slower
        "trainer.devices={value} starts {n} training processes on {cores} usable CPU cores: each gets {share:.2g} "
        "of a core and every step waits for the slowest, so expect each step to take more than {slower:.2g}x as "
        "long as with trainer.devices={cores} (docs/reliability.md: 4 processes on 2 cores ran 6.6x slower); use "
        "trainer.devices={cores} or fewer (trainer=cpu for one process)"
    ),
    "fp16_on_cpu": (
        "trainer.precision={value} (float16) runs on GPUs only and Lightning would silently switch to bf16-mixed on "
        "CPU; use trainer.precision=32 or trainer.precision=bf16-mixed"
    ),
    "bf16_unsupported": (
        "trainer.precision={value} needs bfloat16, which this GPU ({device}) does not support "
        "(torch.cuda.is_bf16_supported() is False); use trainer.precision=16-mixed or trainer.precision=32"
    ),
    "logger_needed": (
        "callbacks.{name} ({target}) needs a logger, but logger={logger} configures none; "
        "choose logger=csv, or drop the callback with ~callbacks.{name}"
    ),
    "ckpt_missing": (
        "ckpt_path={value}: no such file; resume from <run dir>/checkpoints/last.ckpt of an earlier run, "
        "or set ckpt_path=null to start fresh"
    ),
    # ---------------------------------------------------------------- run directory (RunConfigError, before any job)
    "output_is_file": (
        "{key}={path} is an existing file, not a directory; give a directory (it is created if needed), "
        "e.g. {key}={path}_run"
    ),
    "output_under_file": "{key}={path} cannot be created: {parent} is a file, not a directory; give a directory outside it",
    "output_unwritable": (
        "{key}={path} cannot be created or written ({reason}); give a directory you can write to, "
        "e.g. {key}=outputs/my_run"
    ),
    # ---------------------------------------------------------------- checkpoints (CheckpointError)
    "ckpt_unsafe": (
        "{path} holds pickled Python objects that a weights-only load refuses ({detail}); refusing to load it, since "
        "unpickling can run arbitrary code. Checkpoints written by src.train hold only tensors and plain data: "
        "if you trust this file, re-save its contents as plain dicts/tensors (or safetensors) and load that"
    ),
    "ckpt_unreadable": (
        "{path} is not a readable checkpoint ({detail}); the file may be truncated or not a torch checkpoint. "
        "Resume from another one (checkpoints/last.ckpt or best-*.ckpt), or set ckpt_path=null to start fresh"
    ),
    "ckpt_missing_file": "no checkpoint at {path}; run directories keep them in <run dir>/checkpoints/ (last.ckpt, best-*.ckpt)",
    "ckpt_is_dir": (
        "{path} is a directory, not a checkpoint file; give one of its .ckpt files ({found}). Sharded FSDP "
        "checkpoints are directories: train with trainer.strategy.state_dict_type=full to get one file"
    ),
    "ckpt_foreign": "{path} has no hyper_parameters.cfg: it was not written by src.train; give a checkpoint of a src.train run",
    "ckpt_mismatch": (
        "{path} does not fit the model built from this config ({count} mismatched key(s)):\n{details}\n"
        "Fix: use the config the checkpoint was trained with (its run's .hydra/config.yaml), or start fresh (ckpt_path=null)"
    ),
    "resume_config_changed": (
        "{path} was trained with a different config ({count} key(s) differ):\n{details}\n"
        "Resuming continues the same run. Accept these changes anyway: resume.allow_config_change=[{keys}]; "
        "or start a new run from these weights (step 0, a fresh optimizer): init_from={path} ckpt_path=null; "
        "or resume with the checkpoint's config (its run's .hydra/config.yaml)"
    ),
    "bad_allow_list": (
        "resume.allow_config_change={value!r} is invalid: a list of config keys or nodes, "
        "e.g. resume.allow_config_change=[model.dropout,data]"
    ),
    "init_and_resume": (
        "init_from={init_from} and ckpt_path={ckpt_path} both set: ckpt_path resumes that run (same config, its "
        "optimizer and step), init_from starts a new one from its weights; keep one of them"
    ),
    "ckpt_not_weights_only": (
        "refusing to write {path}: the checkpoint would not load with torch.load(weights_only=True) ({detail}); "
        "something put a Python object into it (a callback's state_dict or hyper-parameters) - store plain "
        "dicts/lists/numbers/tensors instead. The previous file at that path is kept"
    ),
    "ckpt_write_failed": (
        "could not write {path} ({reason}); the previous file at that path is kept. Free space on that disk (or "
        "lift the quota), or give the run a directory elsewhere (hydra.run.dir=...), then resume from the last "
        "checkpoint there is"
    ),
    "ckpt_nonfinite": (
        "refusing to write {path}: {count} tensor(s) of its state_dict hold NaN/inf ({names}); the previous file at "
        "that path is kept. See docs/reliability.md (non-finite loss)"
    ),
    # ---------------------------------------------------------------- non-finite loss (NonFiniteLossError)
    "nonfinite_stop": (
        "non-finite training loss (NaN/inf) at step {step}; the run stopped (reliability.nonfinite=stop) and no "
        "checkpoint was written after it. Last good checkpoint: {last}. Fixes: lower optim.lr or raise "
        "scheduler.warmup_steps, keep trainer.gradient_clip_val, prefer bf16-mixed to 16-mixed, or set "
        "reliability.nonfinite=skip to drop such updates; then resume with ckpt_path=<that checkpoint>"
    ),
    "nonfinite_diverged": (
        "non-finite training loss (NaN/inf) at {count} consecutive steps (the last at step {step}; "
        "reliability.max_consecutive_skips={limit}); the run has diverged and stopped. Last good checkpoint: {last}. "
        "Fixes: lower optim.lr or raise scheduler.warmup_steps, keep trainer.gradient_clip_val; then resume with "
        "ckpt_path=<that checkpoint>"
    ),
    # ---------------------------------------------------------------- preemption (Preempted: exit 128 + signal)
    "preempted": (
        "preempted by {signal} at step {step}: wrote {path}, a resumable checkpoint of this step. Resume with "
        "ckpt_path={path}; a sweep continues its unfinished jobs when run again with "
        "sweep_resume.skip_completed=true sweep_resume.incomplete=last"
    ),
    "preempted_unsaved": (
        "preempted by {signal} at step {step} during {stage}; no checkpoint written{last}. Run it again to continue "
        "(ckpt_path=<that checkpoint>, or sweep_resume.incomplete=last in a sweep)"
    ),
}


class _CodedError:
    """Mixin: ``code`` keys ``MESSAGES``; ``fields`` fill it in."""

    code: str
    fields: dict[str, Any]

    def _init(self, code: str, fields: dict[str, Any]) -> str:
        self.code, self.fields = code, fields
        return MESSAGES[code].format(**fields)

    def __reduce__(self) -> tuple[Any, ...]:  # picklable: joblib/submitit launchers send a job's error back
        return (_rebuild, (type(self), self.code, self.fields))


def _rebuild(cls: type, code: str, fields: dict[str, Any]) -> BaseException:
    return cls(code, **fields)


class RunConfigError(_CodedError, ValueError):
    """A run config that cannot work (found before anything heavy is built)."""

    def __init__(self, code: str, **fields: Any) -> None:
        ValueError.__init__(self, self._init(code, fields))


class CheckpointError(_CodedError, ValueError):
    """A checkpoint that is unsafe, unreadable, or does not fit; or one that must not be written."""

    def __init__(self, code: str, **fields: Any) -> None:
        ValueError.__init__(self, self._init(code, fields))


class NonFiniteLossError(_CodedError, RuntimeError):
    """Training produced a NaN/inf loss and the run stopped (``reliability.nonfinite``)."""

    def __init__(self, code: str, **fields: Any) -> None:
        RuntimeError.__init__(self, self._init(code, fields))


class Preempted(SystemExit):
    """The run stopped on a preemption signal (SIGTERM, SLURM's requeue signal) after writing a
    resumable checkpoint (``src.callbacks.preemption``); the process exits with 128 + the signal."""

    def __init__(self, key: str, **fields: Any) -> None:
        self.key, self.fields = key, fields
        self.message = MESSAGES[key].format(**fields)
        SystemExit.__init__(self, 128 + int(fields["signum"]))  # ``code`` is the exit status

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.key, self.fields))
