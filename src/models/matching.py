"""Matched variants: a model's free size solved so its parameter count equals a reference's.

A comparison of FFN types, position schemes or families is fair only at equal parameter
counts: SwiGLU has three FFN matrices where GELU has two (Shazeer 2020 shrinks d_ff to 2/3;
Narang et al. 2021 compare at equal parameters), a learned position table adds
``max_seq_len × d_model`` weights, and an encoder-decoder's cross-attention adds
``4·d_model²`` per decoder layer; a token mixer (``model/mixer``) has its own projections
(``match_params: {reference: {mixer: {name: attention}}}`` matches it to attention). The run
config asks for a match with::

    match_params:
      reference: gpt2_small          # a conf/model name ...
      # reference: {ffn: {name: gelu}, d_ff: 256}   # ... or the keys in which the reference
      #                                              #     differs from this run's model
      solve: d_ff                    # which size to solve for (SOLVERS: d_ff, layers)
      tolerance: 0.01                # |params - reference| / reference must not exceed this
      multiple_of: 1                 # round d_ff to a multiple (8 or 64 suit GPUs)

A named reference keeps this run's ``vocab_size`` and special token ids (both models read
the same tokenizer). Validation checks the node once (``MatchParams.from_config``);
``src.config.spec.resolve`` solves it (``match_model``) once the vocabulary is known. The solved
sizes go into the resolved spec the task (and every checkpoint) is built from, and ``src.training.setup.build_run`` logs both counts and writes them to
``<run dir>/match_params.json`` (``report_match``), and ``python -m src.report`` shows them.

Counts are exact: the model is built on PyTorch's ``meta`` device (no memory, no init
cost) and its parameters counted (tied weights once), so every component, bias and norm
is included without a hand-written formula.
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from src.errors import ConfigError, check_keys
from src.jsonfile import write_json
from src.models.builder import build_model
from src.models.config import ModelConfig
from src.plain import to_plain

log = logging.getLogger(__name__)

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
FILENAME = "match_params.json"
#: Keys a named reference takes from the run's model (both read the same tokenizer).
VOCAB_KEYS = (
    "vocab_size",
    "pad_token_id",
    "bos_token_id",
    "eos_token_id",
    "decoder_start_token_id",
)


def count_parameters(model: Mapping[str, Any] | ModelConfig) -> int:
    """Exact parameter count of a model config (tied weights counted once), built on ``meta``."""
    config = model if isinstance(model, ModelConfig) else ModelConfig.from_dict(dict(model))
    with torch.device("meta"):
        net = build_model(config)
    return net.num_parameters()


# --------------------------------------------------------------------------- reference
def deep_merge(base: Mapping[str, Any], delta: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``delta`` (nested mappings merged; a group node given by a new
    ``name`` replaces the old node, as a Hydra group override would)."""
    out = copy.deepcopy(dict(base))
    for k, v in delta.items():
        if (
            isinstance(v, Mapping)
            and isinstance(out.get(k), Mapping)
            and v.get("name", out[k].get("name")) == out[k].get("name")
        ):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v) if not isinstance(v, Mapping) else dict(v)
    return out


def compose_model(name: str) -> dict[str, Any]:
    """The model config ``conf/model/<name>.yaml`` (with its defaults list), as a plain dict."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import MissingConfigException
    from omegaconf import OmegaConf

    available = sorted(p.stem for p in (CONF_DIR / "model").glob("*.yaml"))
    if name not in available:
        raise ConfigError(
            f"match_params.reference='{name}' is not a model config; conf/model has: "
            f"{', '.join(available)}"
        )

    def _compose() -> dict[str, Any]:
        cfg = compose(config_name="train", overrides=[f"model={name}"])
        return OmegaConf.to_container(cfg.model, resolve=True)  # type: ignore[return-value]

    try:
        # inside a Hydra app (src.train): reuse its search path
        if GlobalHydra.instance().is_initialized():
            return _compose()
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return _compose()
    except MissingConfigException as e:  # pragma: no cover - guarded by the listing above
        raise ConfigError(f"match_params.reference='{name}': {e}") from None


def reference_config(
    reference: str | Mapping[str, Any], model: Mapping[str, Any]
) -> dict[str, Any]:
    """The reference model config: a conf/model name (with this run's vocabulary), or this
    run's model updated by the given keys."""
    if isinstance(reference, str):
        ref = compose_model(reference)
        for k in VOCAB_KEYS:
            if k in model:
                ref[k] = model[k]
        return ref
    if isinstance(reference, Mapping):
        return deep_merge(model, reference)
    raise ConfigError(
        "match_params.reference must be a conf/model name or a mapping of model keys, not "
        f"{reference!r}"
    )


# --------------------------------------------------------------------------- solvers
Solver = Callable[[dict[str, Any], int, int], dict[str, Any]]
SOLVERS: dict[str, Solver] = {}


def register_solver(name: str) -> Callable[[Solver], Solver]:
    def deco(fn: Solver) -> Solver:
        SOLVERS[name] = fn
        return fn

    return deco


def _with(model: Mapping[str, Any], **keys: Any) -> dict[str, Any]:
    out = dict(model)
    out.update(keys)
    return out


def _width_solution(model: dict[str, Any], target: int, multiple_of: int) -> dict[str, Any] | None:
    """``solve_width``'s model, or None when the count does not grow with d_ff."""
    m = max(1, int(multiple_of))
    lo, hi = 8 * m, 16 * m
    p_lo, p_hi = count_parameters(_with(model, d_ff=lo)), count_parameters(_with(model, d_ff=hi))
    slope = (p_hi - p_lo) / (hi - lo)
    if slope <= 0:
        return None
    exact = lo + (target - p_lo) / slope
    candidates = {max(m, int(math.floor(exact / m)) * m), max(m, int(math.ceil(exact / m)) * m)}
    best = min(candidates, key=lambda f: (abs(count_parameters(_with(model, d_ff=f)) - target), f))
    return _with(model, d_ff=best)


def solve_width(model: dict[str, Any], target: int, multiple_of: int = 1) -> dict[str, Any]:
    """d_ff such that the count is nearest ``target``. The count is affine in d_ff (every FFN
    matrix and bias scales with it), so two probes give the line; the rounded neighbours are
    then counted exactly and the nearest kept."""
    solved = _width_solution(model, target, multiple_of)
    if solved is None:
        raise ConfigError(
            "the parameter count does not grow with d_ff; this model has no FFN width to solve for"
        )
    return solved


@register_solver("d_ff")
def _solve_d_ff(model: dict[str, Any], target: int, multiple_of: int) -> dict[str, Any]:
    return solve_width(model, target, multiple_of)


@register_solver("layers")
def _solve_layers(model: dict[str, Any], target: int, multiple_of: int) -> dict[str, Any]:
    """Encoder-decoder: equal encoder and decoder depth n (n = 1 … n_layer), then d_ff; the n
    whose solved d_ff is nearest the configured d_ff (in log ratio) is kept, so the shape is
    distorted least. Other families: d_ff only."""
    if model.get("family") != "encoder_decoder":
        return solve_width(model, target, multiple_of)
    d_ff0 = int(model["d_ff"])
    best: tuple[float, dict[str, Any]] | None = None
    for n in range(1, int(model["n_layer"]) + 1):
        trial = _with(model, n_encoder_layer=n, n_decoder_layer=n)
        solved = _width_solution(trial, target, multiple_of)
        if solved is None or solved["d_ff"] < max(multiple_of, 4):
            continue
        score = abs(math.log(solved["d_ff"] / d_ff0))
        if best is None or score < best[0]:
            best = (score, solved)
    if best is None:
        raise ConfigError(
            f"no encoder/decoder depth up to n_layer={model['n_layer']} reaches {target:,} "
            "parameters; raise model.n_layer or model.d_model"
        )
    return best[1]


# --------------------------------------------------------------------------- the match
@dataclass
class MatchResult:
    reference: Any  # as configured (name or mapping)
    reference_params: int
    params: int
    rel_error: float  # (params - reference_params) / reference_params
    tolerance: float
    solve: str
    solved: dict[str, Any] = field(default_factory=dict)  # the keys the solver set
    before: dict[str, Any] = field(default_factory=dict)  # their values before

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MatchParams:
    """``match_params``: solve the model's sizes (``solve``) so its parameter count is within
    ``tolerance`` of ``reference``'s (a conf/model name or a mapping of model keys), each solved
    size a multiple of ``multiple_of``. Checked once, when made (``from_config``, at validation)."""

    reference: str | Mapping[str, Any]
    solve: str = "d_ff"
    tolerance: float = 0.01
    multiple_of: int = 1

    def __post_init__(self) -> None:
        if self.solve not in SOLVERS:
            raise ConfigError(
                f"match_params.solve='{self.solve}' is not known; use one of "
                f"{', '.join(sorted(SOLVERS))}"
            )
        if (
            isinstance(self.tolerance, bool)
            or not isinstance(self.tolerance, (int, float))
            or not 0 <= self.tolerance < 1
        ):
            raise ConfigError(
                f"match_params.tolerance={self.tolerance} must be a fraction in [0, 1), e.g. 0.01 "
                "for 1%"
            )
        if (
            isinstance(self.multiple_of, bool)
            or not isinstance(self.multiple_of, int)
            or self.multiple_of < 1
        ):
            raise ConfigError(
                f"match_params.multiple_of={self.multiple_of} must be a whole number >= 1"
            )

    @classmethod
    def from_config(cls, plain: Mapping[str, Any]) -> MatchParams | None:
        """The run config's ``match_params`` when it names a reference, else None."""
        node = to_plain(plain.get("match_params"))
        if not node or node.get("reference") in (None, "", "null"):
            return None
        check_keys(node, MATCH_KEYS, where="match_params", prefix="match_params.")
        return cls(**node)


def match_model(
    model: Mapping[str, Any], params: MatchParams
) -> tuple[dict[str, Any], MatchResult]:
    """(the model with its size solved, the match) so its count is within ``params.tolerance`` of
    the reference's."""
    reference, solve, tolerance = params.reference, params.solve, float(params.tolerance)
    multiple_of = int(params.multiple_of)
    model = dict(model)
    target = count_parameters(reference_config(reference, model))
    solved = SOLVERS[solve](model, target, multiple_of)
    params = count_parameters(solved)
    rel = (params - target) / target
    changed = {k: solved[k] for k in solved if solved.get(k) != model.get(k)}
    result = MatchResult(
        reference=reference,
        reference_params=target,
        params=params,
        rel_error=rel,
        tolerance=float(tolerance),
        solve=solve,
        solved=changed,
        before={k: model.get(k) for k in changed},
    )
    if abs(rel) > tolerance:
        raise ConfigError(
            f"match_params: solving {solve} gives {params:,} parameters, {100 * rel:+.2f}% from "
            f"the reference's {target:,} (tolerance {100 * tolerance:.2f}%); loosen "
            "match_params.tolerance, lower multiple_of, or solve=layers for an encoder-decoder"
        )
    return solved, result


MATCH_KEYS = ("reference", "solve", "tolerance", "multiple_of")


def report_match(result: MatchResult, run_dir: str | Path | None) -> None:
    """Log both counts and write ``<run dir>/match_params.json``."""
    log.info(
        "match_params: %s -> %s: %s parameters vs reference %s (%+.3f%%, tolerance %.2f%%)",
        result.before,
        result.solved,
        f"{result.params:,}",
        f"{result.reference_params:,}",
        100 * result.rel_error,
        100 * result.tolerance,
    )
    if run_dir:
        write_json(Path(run_dir) / FILENAME, result.to_dict())
