"""Checkpoint files that are always whole, safe to load, and fit the model.

``SafeCheckpointIO`` is the Lightning ``CheckpointIO`` plugin every run uses
(``src.training.harden.harden_trainer`` installs it):

* **atomic writes** — ``torch.save`` into ``.<name>.<pid>.tmp`` in the same directory, ``fsync``,
  verify, ``os.replace`` onto the real name, ``fsync`` the directory. A kill at any moment leaves
  either the old file or the new one, never a torn ``last.ckpt``; a leftover ``.tmp`` is removed by
  the next successful save of that name;
* **verified writes** — the temporary file is re-opened with ``torch.load(weights_only=True,
  mmap=True)`` before it replaces anything, so a checkpoint that could not be resumed safely
  (a Python object in a callback's state) is refused when written, not discovered at resume;
* **finite writes** — a ``state_dict`` holding NaN/inf is refused (the previous file stays);
* **a content hash** — every checkpoint carries the SHA-256 of its contents, checked on every
  load together with the finiteness of its weights (``src.checkpoints.integrity``);
* **confined callback paths** — the paths in ``ModelCheckpoint``'s stored state are rewritten
  into the run's checkpoint directory or dropped on load, and ``remove_checkpoint`` deletes only
  files directly in a checkpoint directory of the trainer (``src.checkpoints.callback_state``);
* **a full disk** — torch's zip writer reports it as a ``RuntimeError`` ("unexpected pos",
  "PytorchStreamWriter failed writing"), not an ``OSError``; both become the ``CheckpointError``
  of a refused write;
* **weights-only loads** — ``load_checkpoint`` always uses ``torch.load(weights_only=True)``
  (Lightning passes ``weights_only=None`` on ``fit(ckpt_path=...)``); a pickled object is refused
  with a ``CheckpointError`` (unpickling could run it), and so is a torn or foreign file;
* **same run, and fit, on resume** — the checkpoint's config must be the run's (model, task,
  data, batches: ``checkpoint_fit.check_same_run``, ``resume.allow_config_change``), and its
  ``state_dict`` is compared with the trainer's LightningModule, every mismatched key/shape
  reported (``checkpoint_fit``).

Remote paths (``s3://`` …) fall back to Lightning's own fsspec transaction write.
"""

from __future__ import annotations

import copy
import logging
import os
import pickle
import re
import weakref
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from src.checkpoints.callback_state import (
    confine_callback_paths,
    inside_dirs,
    is_model_checkpoint_state,
)
from src.checkpoints.fit import check_same_run, check_state_dict_fits, unreadable
from src.checkpoints.integrity import check_loaded, nonfinite_tensors, seal
from src.errors import CheckpointError, WriteError
from src.files import atomic_path

log = logging.getLogger(__name__)
PathLike = str | os.PathLike[str]


def _is_remote(path: PathLike) -> bool:
    return "://" in str(path)


def checkpoint_file(path: PathLike) -> Path:
    """``path`` as an existing file; ``CheckpointError`` for a directory (naming the .ckpt files in
    it and in its ``checkpoints/``) or a missing path."""
    p = Path(os.path.expanduser(str(path)))
    if is_sharded(p):  # trainer=fsdp2 trainer.strategy.state_dict_type=sharded
        return p
    if p.is_dir():
        found = sorted(str(f) for f in (*p.glob("*.ckpt"), *p.glob("checkpoints/*.ckpt")))
        listed = (
            ", ".join(found[:3]) + (f" … {len(found)} in all" if len(found) > 3 else "")
            if found
            else "it holds none"
        )
        raise CheckpointError(
            f"{p} is a directory, not a checkpoint file; give one of its .ckpt files ({listed}). "
            "Sharded FSDP checkpoints are directories: train with "
            "trainer.strategy.state_dict_type=full to get one file"
        )
    if not p.is_file():
        raise CheckpointError(
            f"no checkpoint at {p}; run directories keep them in <run dir>/checkpoints/ "
            "(last.ckpt, best-*.ckpt)"
        )
    return p


def is_sharded(p: Path) -> bool:
    """A sharded checkpoint: a directory of torch.distributed.checkpoint shards (``*.distcp``,
    one per rank) and Lightning's ``meta.pt`` (everything but the weights and optimizer states)."""
    return p.is_dir() and (p / "meta.pt").is_file() and any(p.glob("*.distcp"))


def load_sharded(p: Path, map_location: Any = "cpu") -> dict[str, Any]:
    """A sharded checkpoint gathered into one ordinary checkpoint dict in this process, whatever
    world size wrote it (torch.distributed.checkpoint reshards on load): ``meta.pt`` plus the full
    ``state_dict`` and ``optimizer_states``. Used where one process reads a run's checkpoint
    (evaluation, export, the resume checks); training processes load their own shards."""
    import tempfile

    from torch.distributed.checkpoint.api import CheckpointException  # a BaseException
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    checkpoint = _torch_load(p / "meta.pt", map_location)
    with tempfile.TemporaryDirectory() as tmp:  # the gathered weights, read back weights-only
        gathered = Path(tmp) / "gathered.pt"
        try:
            dcp_to_torch_save(p, gathered)
        except (Exception, CheckpointException) as e:  # noqa: BLE001 - torn shards: one line
            raise CheckpointError(unreadable(p, f"{type(e).__name__}: {_first_line(e)}")) from None
        state = _torch_load(gathered, map_location)
    checkpoint["state_dict"] = state.pop("state_dict")
    n = len([k for k in state if re.fullmatch(r"optimizer_\d+", k)])
    checkpoint["optimizer_states"] = [state.pop(f"optimizer_{i}") for i in range(n)]
    return checkpoint


def safe_torch_load(path: PathLike, map_location: Any = "cpu") -> Any:
    """``torch.load(path, weights_only=True)`` with errors that say what is wrong and what to do;
    the content hash and the finiteness of the weights checked (``src.checkpoints.integrity``).
    A sharded checkpoint directory is gathered into one dict (``load_sharded``)."""
    p = checkpoint_file(path)
    checkpoint = load_sharded(p, map_location) if p.is_dir() else _torch_load(p, map_location)
    check_loaded(checkpoint, p)
    return with_current_keys(checkpoint)


#: run-config keys a checkpoint may hold under an earlier name -> today's name
RENAMED_RUN_KEYS = {"task": "objective"}


#: run-config keys added after checkpoints were written -> the value that is what such a checkpoint
#: ran (the model and data of that time), filled in where the checkpoint's node lacks the key
ADDED_RUN_KEYS: dict[str, Any] = {
    "model.layer_masks": None,
    "model.attn_softcap": None,
    "model.final_softcap": None,
    "model.attn_kernel": "sdpa",
    "model.sinks": {"name": "none"},
    "model.attention": {"name": "standard"},
    "model.mixer": {"name": "attention"},
    "model.layer_mixers": None,
    "model.parametrization": {"name": "sp"},
    "data.document_mask": False,
    "trainer.activation_checkpointing": False,
    "trainer.tensor_parallel": 1,
    "trainer.device_memory_gb": None,
}
#: keys one objective's node gained since, by ``objective.name`` (the other objectives have none):
#: the chunked training loss of issue 58 (the same loss and gradients as the full logits)
ADDED_OBJECTIVE_KEYS: dict[str, dict[str, Any]] = {"causal_lm": {"loss_chunk_tokens": 1024}}


def with_current_keys(checkpoint: Any) -> Any:
    """The checkpoint with its run config (``hyper_parameters.cfg``) in today's keys, so a
    checkpoint written under an earlier name of a key, or before a key existed, loads, resumes and
    branches as one written today (checked after the content hash, which covers what was
    written)."""
    hp = checkpoint.get("hyper_parameters") if isinstance(checkpoint, dict) else None
    cfg = hp.get("cfg") if isinstance(hp, dict) else None
    if isinstance(cfg, dict):
        for old, new in RENAMED_RUN_KEYS.items():
            if old in cfg and new not in cfg:
                cfg[new] = cfg.pop(old)
        for dotted, value in ADDED_RUN_KEYS.items():
            node, key = dotted.split(".", 1)
            if isinstance(cfg.get(node), dict) and key not in cfg[node]:
                cfg[node][key] = copy.deepcopy(value)
        objective = cfg.get("objective")
        if isinstance(objective, dict):
            for key, value in ADDED_OBJECTIVE_KEYS.get(objective.get("name"), {}).items():
                objective.setdefault(key, copy.deepcopy(value))
    return checkpoint


def _torch_load(p: Path, map_location: Any) -> Any:
    try:
        with open(p, "rb") as f:
            return torch.load(f, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        found = re.search(r"[Uu]nsupported (?:global: )?GLOBAL (\S+)", str(e))
        if found:
            raise CheckpointError(
                f"{p} holds pickled Python objects that a weights-only load refuses (it references "
                f"{found.group(1)}); refusing to load it, since unpickling can run arbitrary code. "
                "Checkpoints written by src.train hold only tensors and plain data: if you trust "
                "this file, re-save its contents as plain dicts/tensors (or safetensors) and load "
                "that"
            ) from None
        raise CheckpointError(unreadable(p, _first_line(e))) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, ValueError, OSError) as e:
        raise CheckpointError(unreadable(p, f"{type(e).__name__}: {_first_line(e)}")) from None
    except (KeyError, IndexError, TypeError, AttributeError) as e:
        # the unpickler reading a file that is no pickle (a text file): no traceback either
        raise CheckpointError(unreadable(p, f"not a torch.save file: {type(e).__name__}")) from None


def _first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    for ln in lines:
        if "WeightsUnpickler error" in ln or "PytorchStreamReader" in ln or "GLOBAL" in ln:
            return ln
    return lines[0] if lines else type(e).__name__


def atomic_torch_save(
    obj: Any, dest: PathLike, *, verify: bool = True, root: PathLike | None = None
) -> Path:
    """``torch.save`` through ``src.files.atomic_path`` (temporary file beside ``dest``, fsync,
    rename; confined to ``root`` when given); with ``verify`` the temporary file is re-opened
    weights-only before it replaces ``dest``."""
    dest = Path(dest)
    try:
        with atomic_path(dest, root=root) as tmp:
            with open(tmp, "wb") as f:
                try:
                    torch.save(obj, f)
                except RuntimeError as e:  # torch's zip writer on a full disk: not an OSError
                    if not _WRITER_FAILED.search(str(e)):
                        raise
                    raise CheckpointError(
                        _write_refused(dest, f"the disk refused the write: {_first_line(e)}")
                    ) from None
            if verify:
                try:
                    torch.load(tmp, map_location="cpu", weights_only=True, mmap=True)
                except pickle.UnpicklingError as e:
                    raise CheckpointError(
                        f"refusing to write {dest}: the checkpoint would not load with "
                        f"torch.load(weights_only=True) ({_first_line(e)}); something put a Python "
                        "object into it (a callback's state_dict or hyper-parameters) - store "
                        "plain dicts/lists/numbers/tensors instead. The previous file at that "
                        "path is kept"
                    ) from None
    # a full disk, a quota, a read-only or vanished directory (src.files: a WriteError)
    except OSError as e:
        cause = e.__cause__ if isinstance(e, WriteError) and isinstance(e.__cause__, OSError) else e
        raise CheckpointError(
            _write_refused(dest, cause.strerror or f"{type(cause).__name__}: {cause}")
        ) from e
    return dest


#: what torch's zip writer (caffe2 inline_container.cc) says when the file system refuses a write
_WRITER_FAILED = re.compile(
    r"unexpected pos|PytorchStreamWriter failed|inline_container|file write failed"
)


def _write_refused(dest: Path, reason: str) -> str:
    try:
        free = os.statvfs(dest.parent).f_bavail * os.statvfs(dest.parent).f_frsize
        room = f"; {free:,} bytes free there"
    except (OSError, AttributeError):
        room = ""
    return (
        f"could not write {dest} ({reason}){room}; the previous file at that path is kept. Free "
        "space on that disk (or lift the quota), or give the run a directory elsewhere "
        "(hydra.run.dir=...), then resume from the last checkpoint there is"
    )


class SafeCheckpointIO(TorchCheckpointIO):
    """Atomic, verified, finite writes; weights-only loads checked against the model (see module
    doc)."""

    def __init__(self, verify: bool = True, check_finite: bool = True) -> None:
        super().__init__()
        self.verify, self.check_finite = verify, check_finite
        self._trainer: Callable[[], Any] = lambda: None

    def attach(self, trainer: Any) -> None:
        """Remember the trainer (weakly) so loads can be compared with its LightningModule."""
        self._trainer = weakref.ref(trainer)

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: PathLike, storage_options: Any | None = None
    ) -> None:
        if storage_options is not None or _is_remote(path):
            return super().save_checkpoint(checkpoint, path, storage_options)
        if self.check_finite:
            bad = nonfinite_tensors(checkpoint.get("state_dict") or {})
            if bad:
                shown = ", ".join(bad[:5]) + (f" … and {len(bad) - 5} more" if len(bad) > 5 else "")
                raise CheckpointError(
                    f"refusing to write {path}: {len(bad)} tensor(s) of its state_dict hold "
                    f"NaN/inf ({shown}); the previous file at that path is kept. See "
                    "docs/reliability.md (non-finite loss)"
                )
        atomic_torch_save(seal(checkpoint), path, verify=self.verify, root=self._run_dir(path))

    def _run_dir(self, path: PathLike) -> str | None:
        """The trainer's ``default_root_dir`` (the run directory) when ``path`` lies in it: the root
        a checkpoint's directory must not leave through a symlink."""
        trainer = self._trainer()
        root = getattr(trainer, "default_root_dir", None) if trainer is not None else None
        if not root:
            return None
        norm = os.path.normpath(os.path.abspath(path))
        top = os.path.normpath(os.path.abspath(root))
        return root if norm.startswith(top + os.sep) else None

    def _checkpoint_dirs(self) -> list[str]:
        trainer = self._trainer()
        return (
            [
                str(cb.dirpath)
                for cb in getattr(trainer, "checkpoint_callbacks", None) or []
                if getattr(cb, "dirpath", None)
            ]
            if trainer is not None
            else []
        )

    def remove_checkpoint(self, path: PathLike) -> None:
        """Delete ``path`` only when it lies directly in a checkpoint directory of the trainer (a
        path taken from a checkpoint's state never reaches outside it); anything else is kept, with
        a warning."""
        if _is_remote(path) or inside_dirs(path, self._checkpoint_dirs()):
            return super().remove_checkpoint(path)
        log.warning(
            "not deleting %s: it is not a file of this run's checkpoint directories (%s)",
            path,
            ", ".join(self._checkpoint_dirs()) or "none",
        )

    def load_checkpoint(
        self,
        path: PathLike,
        map_location: Any = lambda storage, loc: storage,
        weights_only: bool | None = None,
    ) -> dict[str, Any]:
        if weights_only is False:
            log.warning(
                "weights_only=False was requested for %s; loading with weights_only=True anyway "
                "(docs/reliability.md: checkpoints never unpickle arbitrary objects)",
                path,
            )
        if _is_remote(path):
            return super().load_checkpoint(path, map_location=map_location, weights_only=True)
        # hash and finite weights checked
        checkpoint = safe_torch_load(path, map_location=map_location)
        self._confine_callback_state(checkpoint, path)
        trainer = self._trainer()
        module = getattr(trainer, "lightning_module", None) if trainer is not None else None
        if module is not None and isinstance(checkpoint, Mapping) and "state_dict" in checkpoint:
            # shapes first: no override can fix those
            check_state_dict_fits(module, checkpoint, path=str(path))
            # a resume continues the run
            check_same_run(checkpoint, getattr(module, "cfg", None), path=str(path))
        return checkpoint

    def _confine_callback_state(self, checkpoint: Any, path: PathLike) -> None:
        """Every ``ModelCheckpoint`` state's paths into its current ``dirpath`` (that callback's,
        else the loaded file's directory), or dropped (``src.checkpoints.callback_state``)."""
        states = checkpoint.get("callbacks") if isinstance(checkpoint, Mapping) else None
        if not isinstance(states, dict):
            return
        trainer = self._trainer()
        current = (
            {
                cb.state_key: cb.dirpath
                for cb in getattr(trainer, "checkpoint_callbacks", None) or []
                if getattr(cb, "dirpath", None)
            }
            if trainer is not None
            else {}
        )
        for key, state in states.items():
            if is_model_checkpoint_state(state):
                confine_callback_paths(
                    state, current.get(key) or Path(path).expanduser().resolve().parent
                )
