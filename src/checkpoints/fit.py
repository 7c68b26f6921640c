"""Does a checkpoint fit a model, and is it the same run? Report every mismatched key and
shape, and every config key that differs, instead of torch's first ``size mismatch``.

Used on resume (``SafeCheckpointIO.load_checkpoint`` compares with the trainer's LightningModule:
``check_state_dict_fits``, then ``check_same_run``) and by
``src.checkpoints.load`` (``load_checkpoint``, ``init_from_checkpoint``).

**Same run.** ``fit(ckpt_path=...)`` continues a run: same model, objective and data stream. The
checkpoint's resolved config (``hyper_parameters.cfg``) is compared with the current one on
``RUN_KEYS`` (``model``, ``objective``, ``data``, and ``block_size``/``batch_size``/``seed``, which fix
the batches); any value that differs, or a key on one side only, is an error listing them, whether
or not the weights' shapes still match. ``resume.allow_config_change=[model.dropout]`` accepts the
listed keys (a node such as ``data`` accepts every key under it), with a warning. Optimiser,
schedule and trainer settings may change on resume (a longer ``max_steps``, a lower ``lr``).
Starting a *new* run from a checkpoint's weights is ``init_from=<ckpt>`` (fine-tuning: step 0, a
fresh optimizer), where the config may differ and only the shapes must fit.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from torch import Tensor

from src.errors import CheckpointError

log = logging.getLogger(__name__)
MAX_LISTED = 12  # per kind of problem; the count says how many there are
#: what makes two runs the same run: the model, the objective, the data and the batches drawn from
#: it
RUN_KEYS = ("model", "objective", "data", "block_size", "batch_size", "seed")
#: where, not what: never compared
LOCATION_KEYS = ("data.cache_dir", "data.num_proc")


class _Absent:
    """A key on one side only (printed as such in the differences)."""

    def __repr__(self) -> str:
        return "(absent)"


_MISSING = _Absent()


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, Mapping):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def config_differences(
    saved: Mapping[str, Any] | None, current: Mapping[str, Any] | None, prefix: str = "model"
) -> list[str]:
    """``model.d_model: checkpoint 32, config 64`` for every leaf that differs (``name``
    ignored)."""
    if not saved or not current:
        return []
    a, b = _flat(saved, prefix), _flat(current, prefix)
    return [
        f"{k}: checkpoint {a.get(k)!r}, config {b.get(k)!r}"
        for k in sorted(set(a) | set(b))
        if k != f"{prefix}.name" and a.get(k) != b.get(k)
    ]


def _shape(t: Any) -> list[int] | None:
    return list(t.shape) if isinstance(t, Tensor) else None


def state_dict_problems(
    expected: Mapping[str, Any], found: Mapping[str, Any], *, strict: bool = True
) -> tuple[list[str], int]:
    """(lines describing shape mismatches, missing and unexpected keys; number of keys concerned).
    Both are empty/0 when ``found`` loads into a module whose state dict is ``expected``."""
    missing = [k for k in expected if k not in found]
    unexpected = [k for k in found if k not in expected]
    shapes = [
        f"{k}: checkpoint {_shape(found[k])}, model {_shape(expected[k])}"
        for k in expected
        if k in found and _shape(found[k]) != _shape(expected[k])
    ]
    lines: list[str] = []

    def add(title: str, items: list[str]) -> None:
        if items:
            more = f" … and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else ""
            lines.append(f"  {title} ({len(items)}): " + "; ".join(items[:MAX_LISTED]) + more)

    add("shape mismatches", shapes)
    if strict:
        add("missing from the checkpoint", missing)
        add("unexpected in the checkpoint", unexpected)
    return lines, len(shapes) + (len(missing) + len(unexpected) if strict else 0)


def check_state_dict_fits(
    module: Any,
    checkpoint: Mapping[str, Any],
    *,
    path: str,
    current_cfg: Mapping[str, Any] | None = None,
) -> None:
    """Raise ``CheckpointError`` (listing every mismatch) unless ``checkpoint['state_dict']`` loads
    into ``module``.

    module: an ``nn.Module`` (a LightningModule); its ``strict_loading`` (default True) decides
    whether missing/unexpected keys count. current_cfg: the run config the module was built
    from (defaults to ``module.cfg``); its ``model`` node is compared with the checkpoint's
    ``hyper_parameters.cfg.model`` to say which settings differ.
    """
    found = checkpoint.get("state_dict")
    if not isinstance(found, Mapping):
        raise CheckpointError(unreadable(path, "it has no 'state_dict'"))
    strict = bool(getattr(module, "strict_loading", True))
    problems, count = state_dict_problems(module.state_dict(), found, strict=strict)
    if not count:
        return
    saved_cfg = ((checkpoint.get("hyper_parameters") or {}).get("cfg") or {}).get("model")
    current = current_cfg if current_cfg is not None else getattr(module, "cfg", None)
    diffs = config_differences(saved_cfg, (current or {}).get("model"))
    if diffs:
        problems.append("  config differences: " + "; ".join(diffs[:MAX_LISTED]))
    details = "\n".join(problems)
    raise CheckpointError(
        f"{path} does not fit the model built from this config ({count} mismatched key(s)):\n"
        f"{details}\nFix: use the config the checkpoint was trained with (its run's "
        ".hydra/config.yaml), or start fresh (ckpt_path=null)"
    )


def unreadable(path: Any, detail: str) -> str:
    """The message for a file that is not a whole torch checkpoint (``src.checkpoints.io`` raises it
    too)."""
    return (
        f"{path} is not a readable checkpoint ({detail}); the file may be truncated or not a torch "
        "checkpoint. Resume from another one (checkpoints/last.ckpt or best-*.ckpt), or set "
        "ckpt_path=null to start fresh"
    )


def run_differences(
    saved: Mapping[str, Any], current: Mapping[str, Any]
) -> list[tuple[str, Any, Any]]:
    """(key, checkpoint value, current value) for every ``RUN_KEYS`` leaf that differs or is on one
    side only."""
    a: dict[str, Any] = {}
    b: dict[str, Any] = {}
    for key in RUN_KEYS:
        if key in saved:
            a.update(_flat(saved[key], key))
        if key in current:
            b.update(_flat(current[key], key))
    return [
        (k, a.get(k, _MISSING), b.get(k, _MISSING))
        for k in sorted(set(a) | set(b))
        if k not in LOCATION_KEYS and (k not in a or k not in b or a[k] != b[k])
    ]


def _allowed(key: str, allowed: Sequence[str]) -> bool:
    return any(key == a or key.startswith(f"{a}.") for a in allowed)


def allow_list(cfg: Mapping[str, Any]) -> list[str]:
    """``resume.allow_config_change``, checked: a list of config keys or nodes (``CheckpointError``
    otherwise; ``validate_run_config`` calls it too, so a bad value fails before anything is
    built)."""
    allowed = (cfg.get("resume") or {}).get("allow_config_change") or []
    if isinstance(allowed, (str, Mapping)) or not all(isinstance(a, str) and a for a in allowed):
        raise CheckpointError(
            f"resume.allow_config_change={allowed!r} is invalid: a list of config keys or nodes, "
            "e.g. resume.allow_config_change=[model.dropout,data]"
        )
    return list(allowed)


def check_same_run(
    checkpoint: Mapping[str, Any], current_cfg: Mapping[str, Any] | None, *, path: str
) -> None:
    """``CheckpointError`` (listing the keys that differ, and the three ways on) unless the
    checkpoint was trained with the same ``RUN_KEYS`` as ``current_cfg`` (up to
    ``current_cfg.resume.allow_config_change``)."""
    saved = (checkpoint.get("hyper_parameters") or {}).get("cfg")
    if not isinstance(saved, Mapping) or not isinstance(current_cfg, Mapping):
        return  # not written by src.train: the state-dict check below still applies
    allowed = allow_list(current_cfg)
    diffs = run_differences(saved, current_cfg)
    blocked = [d for d in diffs if not _allowed(d[0], allowed)]
    if blocked:
        lines = [f"  {k}: checkpoint {old!r}, now {new!r}" for k, old, new in blocked[:MAX_LISTED]]
        if len(blocked) > MAX_LISTED:
            lines.append(f"  … and {len(blocked) - MAX_LISTED} more")
        keys, details = ",".join(k for k, _, _ in blocked), "\n".join(lines)
        raise CheckpointError(
            f"{path} was trained with a different config ({len(blocked)} key(s) "
            f"differ):\n{details}\nResuming continues the same run. Accept these changes anyway: "
            f"resume.allow_config_change=[{keys}]; or start a new run from these weights (step 0, "
            f"a fresh optimizer): init_from={path} ckpt_path=null; or resume with the checkpoint's "
            "config (its run's .hydra/config.yaml)"
        )
    if diffs:
        log.warning(
            "resuming from %s with config changes accepted by resume.allow_config_change: %s",
            path,
            "; ".join(f"{k}: {old!r} -> {new!r}" for k, old, new in diffs[:MAX_LISTED]),
        )
