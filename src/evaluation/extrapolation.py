"""Length extrapolation: perplexity of a causal LM at 1×, 2×, 4× … its training length.

Press et al. 2022 (ALiBi, arXiv:2108.12409, Fig. 1 and Table 2) train at length L and
evaluate at longer contexts with non-overlapping windows: sinusoidal positions collapse
beyond L, rotary degrades, ALiBi keeps improving. Here the same evaluation runs on a run's
validation text::

    factor f, context C = f·L            tokens t_0 … t_N (the same span for every f)
    window k reads t[kS : kS+C] and predicts t[kS+1 : kS+C+1]; S = C (disjoint windows) or
    a smaller stride, in which case only the targets after the previous window are scored

A learned position table has ``max_seq_len`` rows; a context beyond it is reported as
"not applicable: learned position table has N rows" instead of raising. Models that are
not decoder-only (or not causal) are reported the same way. A prefix-LM decoder is scored
with an empty prefix, i.e. causally.

A RoPE model trained without scaling can be evaluated *with* it (``scaling``, a
``model.position.scaling`` node: linear position interpolation, dynamic NTK, YaRN, llama3;
src/models/components/rope_scaling.py): at each length the model is rebuilt with the scaling and
its own weights. Unless the node says otherwise, ``factor`` is that length over the training
length (at least 1: position interpolation fits the context exactly into the trained range) and
``original_max_seq_len`` is the training length. A model whose position has no rotary
frequencies fails with the ConfigError that names ``model.position.scaling``.

Three ways to run it:

* at the end of training: the ``src.callbacks.length_extrapolation.LengthExtrapolation``
  callback (``callbacks.extrapolation`` in a study config; ``scalings: [linear, dynamic, yarn]``);
* standalone: ``python -m src.report extrapolation <run dir | .ckpt> --factors 1 2 4 [--scaling
  yarn]``;
* from Python: ``evaluate_lengths(model, tokens, train_length, scaling={"name": "yarn"})``.

Results go into the run's ``metrics.json`` as ``extrapolation/ppl@2x`` (null when not
applicable, with ``extrapolation/note@2x`` saying why), ``extrapolation/loss@2x`` — with a
scaling ``extrapolation/<name>/ppl@2x`` … — and into ``<run dir>/extrapolation.json``
(``extrapolation_<name>.json``) in full; ``python -m src.report`` plots them.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from src.evaluation.windows import extrapolation_windows, windows_nll
from src.jsonfile import METRICS, update_json, write_json
from src.models.builder import build_model
from src.models.components.positions import PositionLimitError
from src.models.components.rope_scaling import ROPE_SCALINGS
from src.models.config import ModelConfig
from src.models.families import TransformerModel

log = logging.getLogger(__name__)

FILENAME = "extrapolation.json"
DEFAULT_FACTORS = (1.0, 2.0, 4.0)


@dataclass
class LengthResult:
    """Perplexity at one context length (``ppl`` None when not applicable, ``note`` says why)."""

    factor: float
    context_length: int
    loss: float | None = None  # mean NLL per scored token (nats)
    ppl: float | None = None
    tokens_scored: int = 0
    note: str | None = None
    scaling: dict[str, Any] | None = (
        None  # the model.position.scaling evaluated with (None: the model as trained)
    )


def factor_label(f: float) -> str:
    """1.0 -> '1x', 1.5 -> '1.5x'."""
    return f"{int(f)}x" if float(f).is_integer() else f"{f:g}x"


def not_applicable(model: TransformerModel) -> str | None:
    """Why a model cannot be scored as a left-to-right LM of a text (None when it can)."""
    if not model.left_to_right or model.prompt_is_source:
        return f"not applicable: {model.config.family} model (extrapolation scores decoder-only causal LMs)"
    return None


def scaling_node(
    scaling: str | Mapping[str, Any], context: int, train_length: int
) -> dict[str, Any]:
    """A ``model.position.scaling`` node for a context of ``context`` tokens: ``factor`` defaults to
    context / train_length (at least 1), ``original_max_seq_len`` (where the type reads it) to
    train_length."""
    node = {"name": scaling} if isinstance(scaling, str) else dict(scaling)
    node.setdefault("factor", max(1.0, context / train_length))
    if node.get("name") in ROPE_SCALINGS and "original_max_seq_len" in ROPE_SCALINGS.accepted_keys(
        node["name"]
    ):
        node.setdefault("original_max_seq_len", int(train_length))
    return node


def scaled_config(config: ModelConfig, scaling: Mapping[str, Any]) -> ModelConfig:
    """``config`` with ``model.position.scaling`` set, validated: ConfigError naming the key when
    the position has no frequencies to scale or the node is bad."""
    scaled = dataclasses.replace(config, position={**config.position, "scaling": dict(scaling)})
    scaled.validate()
    return scaled


def with_scaling(model: TransformerModel, scaling: Mapping[str, Any]) -> TransformerModel:
    """A copy of ``model`` (same weights, device, dtype; eval mode) whose RoPE has ``scaling``."""
    scaled = build_model(scaled_config(model.config, scaling))
    scaled.load_state_dict(model.state_dict(), strict=True)
    p = next(model.parameters())
    return scaled.to(device=p.device, dtype=p.dtype).eval()


def scaling_label(scaling: str | Mapping[str, Any] | None) -> str | None:
    """'yarn' for {name: yarn, …}; None for no scaling (the metrics prefix
    ``extrapolation/<label>``)."""
    if scaling is None:
        return None
    return scaling if isinstance(scaling, str) else str(scaling["name"])


@torch.inference_mode()
def score_length(
    model: TransformerModel,
    tokens: torch.Tensor,
    context: int,
    stride: int,
    max_batch_tokens: int = 16384,
) -> tuple[float, int]:
    """(Σ NLL in nats, tokens scored) over windows of ``context`` tokens every ``stride``.

    tokens: [N+1]. The first window scores all its ``context`` targets, each later one only the
    last ``stride`` (those the previous window did not): ``extrapolation_windows``.
    """
    windows = extrapolation_windows(tokens.numel(), context, stride)
    total, scored, _ = windows_nll(
        model,
        tokens,
        windows,
        batch_size=max(1, max_batch_tokens // context),
        max_batch_tokens=max_batch_tokens,
    )
    return total, scored


def evaluate_lengths(
    model: TransformerModel,
    tokens: Sequence[int] | np.ndarray | torch.Tensor,
    train_length: int,
    factors: Sequence[float] = DEFAULT_FACTORS,
    stride: int | None = None,
    max_tokens: int | None = None,
    max_batch_tokens: int = 16384,
    scaling: str | Mapping[str, Any] | None = None,
) -> list[LengthResult]:
    """Perplexity at ``factor × train_length`` for each factor on the same span of ``tokens``.

    ``stride`` None: disjoint windows (Press et al.'s non-overlapping evaluation); otherwise
    windows every ``stride`` tokens (at most the context length). ``max_tokens`` caps the span.
    The span is cut to a multiple of the longest context so every factor scores the same text.
    ``scaling``: evaluate with this RoPE scaling (a type name or a ``model.position.scaling``
    node; see ``scaling_node`` for its defaults), the model rebuilt at each length.
    """
    if train_length < 1:
        raise ValueError(f"train_length={train_length} must be positive")
    contexts = [max(2, int(round(f * train_length))) for f in factors]
    nodes = [None if scaling is None else scaling_node(scaling, c, train_length) for c in contexts]
    results = [LengthResult(float(f), c, scaling=n) for f, c, n in zip(factors, contexts, nodes)]
    if scaling is not None:
        # a bad node fails here, naming its key, before any scoring
        scaled_config(model.config, nodes[0])
    why = not_applicable(model)
    if why:
        for r in results:
            r.note = why
        return results
    rows = model.max_positions
    ids = torch.as_tensor(
        np.asarray(tokens, dtype=np.int64) if not isinstance(tokens, torch.Tensor) else tokens
    ).long()
    n = ids.numel() - 1
    if max_tokens is not None:
        n = min(n, int(max_tokens))
    longest = max(contexts)  # one span for every factor (and every model of a study)
    n = (n // longest) * longest
    if n == 0:
        raise ValueError(
            f"the text has {ids.numel()} tokens; at least {longest + 1} are needed for a "
            f"{longest}-token context"
        )
    ids = ids[: n + 1]
    was_training = model.training
    model.eval()
    try:
        for r in results:
            if rows is not None and r.context_length > rows:
                r.note = (
                    f"not applicable: learned position table has {rows} rows (context "
                    f"{r.context_length} = {factor_label(r.factor)} training length {train_length})"
                )
                continue
            step = r.context_length if stride is None else min(int(stride), r.context_length)
            scored = model if r.scaling is None else with_scaling(model, r.scaling)
            try:
                nll, k = score_length(scored, ids, r.context_length, step, max_batch_tokens)
            except PositionLimitError as e:  # a table we did not see above
                r.note = f"not applicable: {e}"
                continue
            r.tokens_scored = k
            if k:
                r.loss = nll / k
                r.ppl = math.exp(min(r.loss, 50.0))
    finally:
        model.train(was_training)
    return results


def metrics_from(
    results: Sequence[LengthResult], train_length: int, prefix: str = "extrapolation"
) -> dict[str, Any]:
    """Flat ``metrics.json`` keys: ``extrapolation/ppl@2x``, ``…/loss@2x``, ``…/note@2x``,
    ``…/train_length``."""
    out: dict[str, Any] = {f"{prefix}/train_length": int(train_length)}
    for r in results:
        tag = factor_label(r.factor)
        out[f"{prefix}/ppl@{tag}"] = r.ppl
        out[f"{prefix}/loss@{tag}"] = r.loss
        if r.note:
            out[f"{prefix}/note@{tag}"] = r.note
    return out


def write_results(
    run_dir: str | Path,
    results: Sequence[LengthResult],
    train_length: int,
    extra: dict[str, Any] | None = None,
    scaling: str | None = None,
) -> Path:
    """``<run dir>/extrapolation.json`` (``extrapolation_<scaling>.json``) with every field of every
    length."""
    record = {
        "train_length": int(train_length),
        "lengths": [asdict(r) for r in results],
        **(extra or {}),
    }
    name = FILENAME if scaling is None else f"{Path(FILENAME).stem}_{scaling}.json"
    return write_json(Path(run_dir) / name, record)


def format_table(results: Sequence[LengthResult]) -> str:
    lines = ["factor  context  ppl        loss     tokens"]
    for r in results:
        if r.ppl is None:
            lines.append(f"{factor_label(r.factor):>6}  {r.context_length:>7}  {r.note or '–'}")
        else:
            lines.append(
                f"{factor_label(r.factor):>6}  {r.context_length:>7}  {r.ppl:<9.3f}  "
                f"{r.loss:<7.4f}  {r.tokens_scored}"
            )
    return "\n".join(lines)


# --------------------------------------------------------------------------- standalone
def validation_tokens(cfg: dict[str, Any], tokenizer: Any, split: str = "val") -> np.ndarray:
    """The tokens of a run's ``split`` (its data config and tokenizer; the token cache is
    reused)."""
    from src.data.datamodule import LMDataModule, build_datamodule

    block = int(cfg.get("block_size") or cfg["model"]["max_seq_len"])
    dm = build_datamodule(
        cfg["data"], tokenizer, block_size=block, batch_size=1, seed=int(cfg.get("seed", 0))
    )
    if not isinstance(dm, LMDataModule):
        raise ValueError(
            f"data={cfg['data'].get('name')} yields sentence pairs, not a text; extrapolation "
            "needs a text source (or pass --text FILE)"
        )
    dm.setup("validate")
    if split not in dm.tokens:
        raise ValueError(f"split '{split}' is not one of {sorted(dm.tokens)}")
    return np.asarray(dm.tokens[split])


def resolve_checkpoint(path: str | Path, which: str = "last") -> tuple[Path, Path]:
    """(checkpoint file, run dir) from a run dir or a .ckpt path."""
    p = Path(path)
    if p.is_file():
        run_dir = p.parent.parent if p.parent.name == "checkpoints" else p.parent
        return p, run_dir
    ckpts = p / "checkpoints"
    if which == "last" and (ckpts / "last.ckpt").is_file():
        return ckpts / "last.ckpt", p
    best = sorted(ckpts.glob("best-*.ckpt"))
    if which == "best" and best:
        return best[-1], p
    found = sorted(x.name for x in ckpts.glob("*.ckpt")) if ckpts.is_dir() else []
    raise FileNotFoundError(
        f"no {which} checkpoint in {ckpts} (found: {', '.join(found) or 'nothing'}); "
        f"give a .ckpt path or --ckpt last|best"
    )


def extrapolate_run(
    path: str | Path,
    *,
    ckpt: str = "last",
    factors: Sequence[float] = DEFAULT_FACTORS,
    stride: int | None = None,
    max_tokens: int | None = None,
    train_length: int | None = None,
    split: str = "val",
    text: str | Path | None = None,
    scaling: Any = None,
    write: bool = True,
) -> tuple[list[LengthResult], str]:
    """Score a run's checkpoint (``path``: a run directory or a .ckpt) at ``factor ×`` its training
    length on a split of its data (or on the text file ``text``); with ``write``, the results go to
    the run's ``extrapolation[_<scaling>].json`` and ``metrics.json``. Returns the results and a
    printable summary (``python -m src.report extrapolation``)."""
    from src.checkpoints.load import load_checkpoint

    ckpt_file, run_dir = resolve_checkpoint(path, ckpt)
    loaded = load_checkpoint(ckpt_file)
    length = train_length or int(loaded.cfg.get("block_size") or loaded.cfg["model"]["max_seq_len"])
    if text is not None:
        if loaded.tokenizer is None:
            raise ValueError(
                f"{ckpt_file} holds no tokenizer, so --text cannot be encoded; evaluate a split "
                "instead"
            )
        tokens = np.asarray(loaded.tokenizer.encode(Path(text).read_text()), dtype=np.int64)
    else:
        tokens = validation_tokens(loaded.cfg, loaded.tokenizer, split)
    results = evaluate_lengths(
        loaded.model, tokens, length, factors, stride, max_tokens, scaling=scaling
    )
    label = scaling_label(scaling)
    summary = (
        f"{ckpt_file} (trained at {length} "
        f"tokens{f', evaluated with {label} RoPE scaling' if label else ''})\n{format_table(results)}"
    )
    if write:
        written = write_results(
            run_dir, results, length, {"checkpoint": str(ckpt_file), "stride": stride}, label
        )
        prefix = "extrapolation" if label is None else f"extrapolation/{label}"
        update_json(run_dir / METRICS, metrics_from(results, length, prefix))
        summary += f"\nwrote {written} and {prefix}/* in {run_dir / METRICS}"
    return results, summary
