"""Does a checkpoint fit a model? Report every mismatched key and shape, and the config keys
that differ, instead of torch's first ``size mismatch``.

Used on resume (``SafeCheckpointIO.load_checkpoint`` compares with the trainer's LightningModule)
and by ``src.reliability.checkpoint_load.load_checkpoint``.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from src.reliability.errors import CheckpointError

MAX_LISTED = 12  # per kind of problem; the count says how many there are


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, Mapping):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def config_differences(saved: Mapping[str, Any] | None, current: Mapping[str, Any] | None,
                       prefix: str = "model") -> list[str]:
    """``model.d_model: checkpoint 32, config 64`` for every leaf that differs (``name`` ignored)."""
    if not saved or not current:
        return []
    a, b = _flat(saved, prefix), _flat(current, prefix)
    return [f"{k}: checkpoint {a.get(k)!r}, config {b.get(k)!r}"
            for k in sorted(set(a) | set(b)) if k != f"{prefix}.name" and a.get(k) != b.get(k)]


def _shape(t: Any) -> list[int] | None:
    return list(t.shape) if isinstance(t, Tensor) else None


def state_dict_problems(expected: Mapping[str, Any], found: Mapping[str, Any], *,
                        strict: bool = True) -> tuple[list[str], int]:
    """(lines describing shape mismatches, missing and unexpected keys; number of keys concerned).
    Both are empty/0 when ``found`` loads into a module whose state dict is ``expected``."""
    missing = [k for k in expected if k not in found]
    unexpected = [k for k in found if k not in expected]
    shapes = [f"{k}: checkpoint {_shape(found[k])}, model {_shape(expected[k])}"
              for k in expected if k in found and _shape(found[k]) != _shape(expected[k])]
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


def check_state_dict_fits(module: Any, checkpoint: Mapping[str, Any], *, path: str,
                          current_cfg: Mapping[str, Any] | None = None) -> None:
    """Raise ``CheckpointError('ckpt_mismatch')`` unless ``checkpoint['state_dict']`` loads into ``module``.

    module: an ``nn.Module`` (a LightningModule); its ``strict_loading`` (default True) decides
    whether missing/unexpected keys count. current_cfg: the run config the module was built
    from (defaults to ``module.cfg``); its ``model`` node is compared with the checkpoint's
    ``hyper_parameters.cfg.model`` to say which settings differ.
    """
    found = checkpoint.get("state_dict")
    if not isinstance(found, Mapping):
        raise CheckpointError("ckpt_unreadable", path=path, detail="it has no 'state_dict'")
    strict = bool(getattr(module, "strict_loading", True))
    problems, count = state_dict_problems(module.state_dict(), found, strict=strict)
    if not count:
        return
    saved_cfg = ((checkpoint.get("hyper_parameters") or {}).get("cfg") or {}).get("model")
    current = current_cfg if current_cfg is not None else getattr(module, "cfg", None)
    diffs = config_differences(saved_cfg, (current or {}).get("model"))
    if diffs:
        problems.append("  config differences: " + "; ".join(diffs[:MAX_LISTED]))
    raise CheckpointError("ckpt_mismatch", path=path, count=count, details="\n".join(problems))
