"""Paths in a checkpoint's callback state act only inside the run's checkpoint directory.

Lightning's ``ModelCheckpoint`` stores absolute paths in its state (``best_k_models``,
``best_model_path``, ``kth_best_model_path``, ``last_model_path``, ``dirpath``) and acts on them
after a resume: it deletes the worse of ``best_k_models`` when a better checkpoint arrives, and its
"inside dirpath" test uses ``Path.absolute()``, which keeps ``..``. So an edited ``last.ckpt``
listing ``<dirpath>/../../../victim.txt`` had a file outside the run deleted; and a run directory
that was moved kept the old paths (``no checkpoint at <old dir>/best-000020.ckpt`` after training).

``confine_callback_paths`` runs on every load through ``SafeCheckpointIO``, before Lightning
restores the callbacks. Each stored path is reduced to its file name: it is kept, as
``<current dirpath>/<name>``, only when it named a file directly in the stored ``dirpath`` (or in
the current one) and that file exists there now as a regular file, not a link; otherwise it is
dropped, with a warning naming it. The state's ``dirpath`` becomes the current one, so a moved run
resumes with its top-k record, and nothing outside the directory is ever named.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PATH_KEYS = (
    "best_model_path",
    "kth_best_model_path",
    "last_model_path",
)  # ModelCheckpoint.state_dict()


def is_model_checkpoint_state(state: Any) -> bool:
    """Whether a callback's state is ``ModelCheckpoint``'s (it holds ``dirpath`` and
    ``best_k_models``)."""
    return isinstance(state, Mapping) and "dirpath" in state and "best_k_models" in state


def _norm(p: str) -> str:
    return os.path.normpath(os.path.abspath(os.path.expanduser(p)))


def confine_callback_paths(
    state: MutableMapping[str, Any], dirpath: str | os.PathLike[str]
) -> list[str]:
    """Rewrite ``state``'s paths into ``dirpath`` or drop them (module docstring); returns the
    dropped ones."""
    here = Path(os.path.realpath(dirpath))
    homes = {str(here), _norm(str(dirpath))}
    if isinstance(state.get("dirpath"), str):
        homes.add(_norm(state["dirpath"]))
    dropped: list[str] = []

    def move(p: Any) -> str | None:
        if not isinstance(p, str) or not p:
            return None
        q = _norm(p)
        cand = here / os.path.basename(q)
        if os.path.dirname(q) in homes and not cand.is_symlink() and cand.is_file():
            return str(cand)
        dropped.append(p)
        return None

    best_k = state.get("best_k_models")
    if isinstance(best_k, Mapping):
        moved = {m: v for p, v in best_k.items() if (m := move(p)) is not None}
        state["best_k_models"] = moved
    for key in PATH_KEYS:
        if key in state:
            state[key] = move(state[key]) or ""
    state["dirpath"] = str(here)
    unique = sorted(set(dropped))
    if unique:
        log.warning(
            "checkpoint callback state: dropped %d path(s) that are not files of %s (a moved or "
            "edited run): %s",
            len(unique),
            here,
            ", ".join(unique)[:500],
        )
    return unique


def inside_dirs(path: str | os.PathLike[str], dirs: list[str]) -> bool:
    """Whether ``path`` (normalised, ``..`` collapsed, the file itself not followed) lies directly
    in one of ``dirs`` (each resolved)."""
    parent = os.path.dirname(_norm(str(path)))
    return any(parent == os.path.realpath(d) or parent == _norm(d) for d in dirs)
