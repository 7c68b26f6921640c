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
from torch import Tensor

from src.errors import CheckpointError
from src.checkpoints.fit import check_same_run, check_state_dict_fits, unreadable
from src.files import atomic_path

log = logging.getLogger(__name__)
PathLike = str | os.PathLike[str]


def _is_remote(path: PathLike) -> bool:
    return "://" in str(path)


def checkpoint_file(path: PathLike) -> Path:
    """``path`` as an existing file; ``CheckpointError`` for a directory (naming the .ckpt files in
    it and in its ``checkpoints/``) or a missing path."""
    p = Path(os.path.expanduser(str(path)))
    if p.is_dir():
        found = sorted(str(f) for f in (*p.glob("*.ckpt"), *p.glob("checkpoints/*.ckpt")))
        listed = ", ".join(found[:3]) + (f" … {len(found)} in all" if len(found) > 3 else "") if found else "it holds none"
        raise CheckpointError(f"{p} is a directory, not a checkpoint file; give one of its .ckpt files ({listed}). "
                              "Sharded FSDP checkpoints are directories: train with "
                              "trainer.strategy.state_dict_type=full to get one file")
    if not p.is_file():
        raise CheckpointError(f"no checkpoint at {p}; run directories keep them in <run dir>/checkpoints/ "
                              "(last.ckpt, best-*.ckpt)")
    return p


def safe_torch_load(path: PathLike, map_location: Any = "cpu") -> Any:
    """``torch.load(path, weights_only=True)`` with errors that say what is wrong and what to do."""
    p = checkpoint_file(path)
    try:
        with open(p, "rb") as f:
            return torch.load(f, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        found = re.search(r"[Uu]nsupported (?:global: )?GLOBAL (\S+)", str(e))
        if found:
            raise CheckpointError(
                f"{p} holds pickled Python objects that a weights-only load refuses (it references "
                f"{found.group(1)}); refusing to load it, since unpickling can run arbitrary code. Checkpoints "
                "written by src.train hold only tensors and plain data: if you trust this file, re-save its "
                "contents as plain dicts/tensors (or safetensors) and load that") from None
        raise CheckpointError(unreadable(p, _first_line(e))) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, ValueError, OSError) as e:
        raise CheckpointError(unreadable(p, f"{type(e).__name__}: {_first_line(e)}")) from None


def _first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    for ln in lines:
        if "WeightsUnpickler error" in ln or "PytorchStreamReader" in ln or "GLOBAL" in ln:
            return ln
    return lines[0] if lines else type(e).__name__


def nonfinite_tensors(state_dict: Mapping[str, Any]) -> list[str]:
    """Names of floating-point tensors holding NaN/inf (one host sync for all of them)."""
    names = [k for k, v in state_dict.items() if isinstance(v, Tensor) and v.is_floating_point() and v.numel()]
    if not names:
        return []
    finite = torch.stack([torch.isfinite(state_dict[k]).all().to("cpu", non_blocking=True) for k in names])
    return [k for k, ok in zip(names, finite.tolist()) if not ok]


def atomic_torch_save(obj: Any, dest: PathLike, *, verify: bool = True) -> Path:
    """``torch.save`` through ``src.files.atomic_path`` (temporary file beside ``dest``, fsync,
    rename); with ``verify`` the temporary file is re-opened weights-only before it replaces ``dest``."""
    dest = Path(dest)
    try:
        with atomic_path(dest) as tmp:
            with open(tmp, "wb") as f:
                torch.save(obj, f)
            if verify:
                try:
                    torch.load(tmp, map_location="cpu", weights_only=True, mmap=True)
                except pickle.UnpicklingError as e:
                    raise CheckpointError(
                        f"refusing to write {dest}: the checkpoint would not load with "
                        f"torch.load(weights_only=True) ({_first_line(e)}); something put a Python object into it "
                        "(a callback's state_dict or hyper-parameters) - store plain dicts/lists/numbers/tensors "
                        "instead. The previous file at that path is kept") from None
    except OSError as e:  # a full disk, a quota, a read-only or vanished directory
        raise CheckpointError(
            f"could not write {dest} ({e.strerror or type(e).__name__}); the previous file at that path is kept. "
            "Free space on that disk (or lift the quota), or give the run a directory elsewhere "
            "(hydra.run.dir=...), then resume from the last checkpoint there is") from e
    return dest


class SafeCheckpointIO(TorchCheckpointIO):
    """Atomic, verified, finite writes; weights-only loads checked against the model (see module doc)."""

    def __init__(self, verify: bool = True, check_finite: bool = True) -> None:
        super().__init__()
        self.verify, self.check_finite = verify, check_finite
        self._trainer: Callable[[], Any] = lambda: None

    def attach(self, trainer: Any) -> None:
        """Remember the trainer (weakly) so loads can be compared with its LightningModule."""
        self._trainer = weakref.ref(trainer)

    def save_checkpoint(self, checkpoint: dict[str, Any], path: PathLike, storage_options: Any | None = None) -> None:
        if storage_options is not None or _is_remote(path):
            return super().save_checkpoint(checkpoint, path, storage_options)
        if self.check_finite:
            bad = nonfinite_tensors(checkpoint.get("state_dict") or {})
            if bad:
                shown = ", ".join(bad[:5]) + (f" … and {len(bad) - 5} more" if len(bad) > 5 else "")
                raise CheckpointError(f"refusing to write {path}: {len(bad)} tensor(s) of its state_dict hold NaN/inf "
                                      f"({shown}); the previous file at that path is kept. See docs/reliability.md "
                                      "(non-finite loss)")
        atomic_torch_save(checkpoint, path, verify=self.verify)

    def load_checkpoint(self, path: PathLike, map_location: Any = lambda storage, loc: storage,
                        weights_only: bool | None = None) -> dict[str, Any]:
        if weights_only is False:
            log.warning("weights_only=False was requested for %s; loading with weights_only=True anyway "
                        "(docs/reliability.md: checkpoints never unpickle arbitrary objects)", path)
        if _is_remote(path):
            return super().load_checkpoint(path, map_location=map_location, weights_only=True)
        checkpoint = safe_torch_load(path, map_location=map_location)
        trainer = self._trainer()
        module = getattr(trainer, "lightning_module", None) if trainer is not None else None
        if module is not None and isinstance(checkpoint, Mapping) and "state_dict" in checkpoint:
            check_state_dict_fits(module, checkpoint, path=str(path))  # shapes first: no override can fix those
            check_same_run(checkpoint, getattr(module, "cfg", None), path=str(path))  # a resume continues the run
        return checkpoint
