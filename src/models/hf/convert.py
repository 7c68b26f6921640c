"""Conversion in both directions: transformers config -> ModelConfig, and state dicts both ways,
each through the registered adapter of the checkpoint's ``model_type``; ``from_hf`` and ``to_hf``
add the files (``files``) and the model (``build_model``).

Strict both ways: every parameter of our model is filled (``load_state_dict(strict=True)``),
and every checkpoint tensor is consumed by a rule, verified as a tied copy, or matched by
the adapter's ``dropped`` patterns, each with its reason (logged). On export the tensors are
checked, names and shapes, against the transformers model class built on the meta device.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from src.errors import HFConversionError
from src.models.builder import build_model
from src.models.config import ModelConfig
from src.models.families import TransformerModel
from src.models.hf.adapter import ADAPTERS, Adapter, get_adapter
from src.models.hf.folders import read_config, read_tensors, resolve, write_checkpoint
from src.models.hf.rules import Checkpoint
from src.models.sizes import check_sizes_fit, weight_count

log = logging.getLogger(__name__)


def _hf_config_object(hf_config: Any) -> Any:
    """A transformers config object; a config.json dict gets transformers' own defaults for
    the keys it omits (``AutoConfig.for_model``, which runs no remote code)."""
    if not isinstance(hf_config, Mapping):
        return hf_config
    d = {k: v for k, v in hf_config.items() if k not in ("model_type", "transformers_version")}
    model_type = hf_config.get("model_type")
    get_adapter(model_type)  # fail on unsupported types before transformers does
    if "auto_map" in d:
        raise HFConversionError(
            f"config has auto_map {d['auto_map']}: custom (remote) code is never run; "
            f"only the built-in {model_type} architecture is converted"
        )
    from transformers import AutoConfig

    return AutoConfig.for_model(model_type, **d)


def config_from_hf(hf_config: Any) -> ModelConfig:
    """Our ModelConfig from a transformers config object or a config.json dict.

    Raises HFConversionError naming the model_type and the key for anything we cannot reproduce
    exactly."""
    hf = _hf_config_object(hf_config)
    adapter = get_adapter(getattr(hf, "model_type", None))
    cfg = adapter.config(hf)
    cfg.name = f"hf-{adapter.model_type}"
    cfg.validate()
    return cfg


def _normalize_keys(tensors: Mapping[str, Tensor], adapter: Adapter) -> dict[str, Tensor]:
    """Rename to the task model's key layout: add the base-model prefix when the checkpoint is
    a bare base model (the original ``gpt2`` repo stores ``h.0…``), and TF-era LayerNorm names."""
    out = {
        re.sub(
            r"LayerNorm\.gamma$",
            "LayerNorm.weight",
            re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", k),
        ): v
        for k, v in tensors.items()
    }
    if not any(k.startswith(adapter.prefix) for k in out):
        out = {
            k if k.startswith(adapter.outside_prefix) else adapter.prefix + k: v
            for k, v in out.items()
        }
    return out


def convert_from_hf(
    tensors: Mapping[str, Tensor], cfg: ModelConfig, model_type: str
) -> dict[str, Tensor]:
    """Hugging Face state dict -> our state dict (strict: every checkpoint tensor accounted for)."""
    adapter = get_adapter(model_type)
    ckpt = Checkpoint(_normalize_keys(tensors, adapter), model_type)
    ours: dict[str, Tensor] = {}
    for rule in adapter.rules(cfg):
        value = rule.load(ckpt)
        if rule.ours is not None:
            ours[rule.ours] = value
    for theirs, mine in adapter.copies(cfg).items():  # tied weights: verify, then drop the copy
        t = ckpt.take_optional(theirs)
        if t is not None and not torch.equal(t, ours[mine]):
            raise HFConversionError(
                f"{model_type} tensor '{theirs}' should be a tied copy of the one we load as "
                f"'{mine}', but differs: the checkpoint has separate weights where our model "
                "shares one (if its LM head is untied, tie_word_embeddings=false in config.json "
                "says so)"
            )
    if cfg.tie_embeddings:
        ours["head.weight"] = ours["tok_embed.weight"]  # Press & Wolf 2017: one matrix in and out
    for pattern, reason in adapter.dropped:
        if n := ckpt.drop(pattern):
            log.info("%s: dropped %d tensor(s) matching %s (%s)", model_type, n, pattern, reason)
    ckpt.finish()
    return ours


def export_adapter(cfg: ModelConfig, model_type: str | None = None) -> Adapter:
    """``model_type``'s adapter, else the first (by name) of ``cfg``'s family that holds it
    exactly; refuses with every candidate's reasons when none does."""
    candidates = (
        [get_adapter(model_type)]
        if model_type
        else [a for a in map(get_adapter, ADAPTERS.names()) if a.family == cfg.family]
    )
    problems = {a.model_type: a.export_problems(cfg) for a in candidates}
    fitting = [a for a in candidates if not problems[a.model_type]]
    if not fitting:
        detail = (
            "; ".join(f"{t}: {', '.join(p)}" for t, p in problems.items())
            or f"no adapter for family {cfg.family}"
        )
        raise HFConversionError(
            f"this model cannot be written as a transformers checkpoint ({detail})"
        )
    return fitting[0]


def convert_to_hf(
    state_dict: Mapping[str, Tensor], cfg: ModelConfig, adapter: Adapter, hf_config: Any
) -> dict[str, Tensor]:
    """Our state dict -> the Hugging Face tensors to save (tied ones once, as ``save_pretrained``).

    Strict both ways: every tensor of ours goes through a rule or a tied copy, and the result is
    checked, names and shapes, against ``adapter.hf_model_class()(hf_config)`` on the meta
    device."""
    ours = {k: v.detach().cpu() for k, v in state_dict.items()}
    for key in (
        "tok_embed.weight",
        "head.weight",
        "head.bias",
    ):  # drop vocab_pad_multiple padding rows
        if key in ours:
            ours[key] = ours[key][: cfg.vocab_size]
    rules, copies = adapter.rules(cfg), adapter.copies(cfg)
    used = {r.ours for r in rules if r.ours is not None} | set(copies.values())
    used |= {"head.weight"} if cfg.tie_embeddings else set()  # the tied head is tok_embed
    # e.g. a variant's weights (QK-norm) the format has no place for
    if left := sorted(set(ours) - used):
        raise HFConversionError(
            f"our tensors {left[:10]} have no rule in the {adapter.model_type} adapter: writing "
            "would silently lose them. Add rules to "
            f"src/models/hf/formats/{adapter.model_type}.py, or refuse this config in its arch"
        )
    hf: dict[str, Tensor] = {}
    for rule in rules:
        hf.update(rule.save(ours[rule.ours] if rule.ours is not None else None))  # type: ignore[arg-type]
    for theirs, mine in copies.items():
        hf[theirs] = ours[mine]

    with torch.device("meta"):  # no memory, no initialisation: only names, shapes and ties
        reference = adapter.hf_model_class()(hf_config).state_dict(keep_vars=True)
    missing, unexpected = sorted(set(reference) - set(hf)), sorted(set(hf) - set(reference))
    wrong = [k for k in reference if k in hf and tuple(hf[k].shape) != tuple(reference[k].shape)]
    if missing or unexpected or wrong:
        raise HFConversionError(
            f"{adapter.model_type} export does not match transformers' model: missing {missing}, "
            f"unexpected {unexpected}, wrong shape {wrong}"
        )
    seen: set[int] = set()
    tensors = {}
    for key, ref in reference.items():  # tied parameters are written once
        if id(ref) not in seen:
            seen.add(id(ref))
            tensors[key] = hf[key].contiguous().clone()
    return tensors


def from_hf(name_or_path: str | Path, *, dtype: torch.dtype | None = None) -> TransformerModel:
    """Our model with the weights of a transformers checkpoint (local directory or Hub name).

    Returns the model in eval mode, in float32 unless ``dtype`` is given (checkpoint tensors
    are cast on load). Supported model types: ``ADAPTERS.names()``.
    """
    folder = resolve(name_or_path)
    hf_dict = read_config(folder)
    cfg = config_from_hf(hf_dict)
    cfg.name = Path(str(name_or_path)).name or cfg.name
    tensors = read_tensors(folder)
    # config.json's sizes against the weight files, before anything is allocated
    # (src/models/sizes.py)
    check_sizes_fit(
        cfg,
        weight_count(tensors.values()),
        where=f"{folder / 'config.json'} (as converted)",
        error=HFConversionError,
    )
    ours = convert_from_hf(tensors, cfg, hf_dict["model_type"])
    model = build_model(cfg)
    try:
        model.load_state_dict(ours, strict=True)  # every parameter of ours filled, nothing extra
    except RuntimeError as e:
        raise HFConversionError(
            f"converted {hf_dict['model_type']} weights do not fit our model: {e}"
        ) from e
    if dtype is not None:
        model.to(dtype)
    return model.eval()


def to_hf(model: TransformerModel, out_dir: str | Path, *, model_type: str | None = None) -> Path:
    """Write ``model`` as a transformers checkpoint (config.json + model.safetensors).

    ``model_type`` (one of ``ADAPTERS.names()``) defaults to the first adapter whose
    architecture matches the model's config (``export_adapter``).
    """
    adapter = export_adapter(model.config, model_type)
    hf_config = adapter.hf_config(model.config)
    hf_config.architectures = [adapter.hf_model_class().__name__]
    return write_checkpoint(
        out_dir, convert_to_hf(model.state_dict(), model.config, adapter, hf_config), hf_config
    )
