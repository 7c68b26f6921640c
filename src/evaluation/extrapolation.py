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

Three ways to run it:

* at the end of training: the ``src.callbacks.length_extrapolation.LengthExtrapolation``
  callback (``callbacks.extrapolation`` in a study config);
* standalone: ``python -m src.evaluation.extrapolation <run dir | .ckpt> --factors 1 2 4``;
* from Python: ``evaluate_lengths(model, tokens, train_length)``.

Results go into the run's ``metrics.json`` as ``extrapolation/ppl@2x`` (null when not
applicable, with ``extrapolation/note@2x`` saying why), ``extrapolation/loss@2x``, and into
``<run dir>/extrapolation.json`` in full; ``python -m src.report`` plots them.
"""
from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from src.evaluation.windows import extrapolation_windows, windows_nll
from src.jsonfile import METRICS, update_json, write_json
from src.models.components.positions import PositionLimitError
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


def factor_label(f: float) -> str:
    """1.0 -> '1x', 1.5 -> '1.5x'."""
    return f"{int(f)}x" if float(f).is_integer() else f"{f:g}x"


def not_applicable(model: TransformerModel) -> str | None:
    """Why a model cannot be scored as a left-to-right LM of a text (None when it can)."""
    if not model.left_to_right or model.prompt_is_source:
        return f"not applicable: {model.config.family} model (extrapolation scores decoder-only causal LMs)"
    return None


@torch.inference_mode()
def score_length(model: TransformerModel, tokens: torch.Tensor, context: int, stride: int, max_batch_tokens: int = 16384
                 ) -> tuple[float, int]:
    """(Σ NLL in nats, tokens scored) over windows of ``context`` tokens every ``stride``.

    tokens: [N+1]. The first window scores all its ``context`` targets, each later one only the
    last ``stride`` (those the previous window did not): ``extrapolation_windows``.
    """
    windows = extrapolation_windows(tokens.numel(), context, stride)
    total, scored, _ = windows_nll(model, tokens, windows, batch_size=max(1, max_batch_tokens // context),
                                   max_batch_tokens=max_batch_tokens)
    return total, scored


def evaluate_lengths(model: TransformerModel, tokens: Sequence[int] | np.ndarray | torch.Tensor, train_length: int,
                     factors: Sequence[float] = DEFAULT_FACTORS, stride: int | None = None,
                     max_tokens: int | None = None, max_batch_tokens: int = 16384) -> list[LengthResult]:
    """Perplexity at ``factor × train_length`` for each factor on the same span of ``tokens``.

    ``stride`` None: disjoint windows (Press et al.'s non-overlapping evaluation); otherwise
    windows every ``stride`` tokens (at most the context length). ``max_tokens`` caps the span.
    The span is cut to a multiple of the longest context so every factor scores the same text.
    """
    if train_length < 1:
        raise ValueError(f"train_length={train_length} must be positive")
    contexts = [max(2, int(round(f * train_length))) for f in factors]
    results = [LengthResult(float(f), c) for f, c in zip(factors, contexts)]
    why = not_applicable(model)
    if why:
        for r in results:
            r.note = why
        return results
    rows = model.max_positions
    ids = torch.as_tensor(np.asarray(tokens, dtype=np.int64) if not isinstance(tokens, torch.Tensor) else tokens).long()
    n = ids.numel() - 1
    if max_tokens is not None:
        n = min(n, int(max_tokens))
    longest = max(contexts)  # one span for every factor (and every model of a study)
    n = (n // longest) * longest
    if n == 0:
        raise ValueError(f"the text has {ids.numel()} tokens; at least {longest + 1} are needed for a {longest}-token context")
    ids = ids[: n + 1]
    was_training = model.training
    model.eval()
    try:
        for r in results:
            if rows is not None and r.context_length > rows:
                r.note = (f"not applicable: learned position table has {rows} rows "
                          f"(context {r.context_length} = {factor_label(r.factor)} training length {train_length})")
                continue
            step = r.context_length if stride is None else min(int(stride), r.context_length)
            try:
                nll, k = score_length(model, ids, r.context_length, step, max_batch_tokens)
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


def metrics_from(results: Sequence[LengthResult], train_length: int, prefix: str = "extrapolation") -> dict[str, Any]:
    """Flat ``metrics.json`` keys: ``extrapolation/ppl@2x``, ``…/loss@2x``, ``…/note@2x``, ``…/train_length``."""
    out: dict[str, Any] = {f"{prefix}/train_length": int(train_length)}
    for r in results:
        tag = factor_label(r.factor)
        out[f"{prefix}/ppl@{tag}"] = r.ppl
        out[f"{prefix}/loss@{tag}"] = r.loss
        if r.note:
            out[f"{prefix}/note@{tag}"] = r.note
    return out


def write_results(run_dir: str | Path, results: Sequence[LengthResult], train_length: int, extra: dict[str, Any] | None = None
                  ) -> Path:
    """``<run dir>/extrapolation.json`` with every field of every length."""
    record = {"train_length": int(train_length), "lengths": [asdict(r) for r in results], **(extra or {})}
    return write_json(Path(run_dir) / FILENAME, record)


def format_table(results: Sequence[LengthResult]) -> str:
    lines = ["factor  context  ppl        loss     tokens"]
    for r in results:
        if r.ppl is None:
            lines.append(f"{factor_label(r.factor):>6}  {r.context_length:>7}  {r.note or '–'}")
        else:
            lines.append(f"{factor_label(r.factor):>6}  {r.context_length:>7}  {r.ppl:<9.3f}  {r.loss:<7.4f}  {r.tokens_scored}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- standalone
def validation_tokens(cfg: dict[str, Any], tokenizer: Any, split: str = "val") -> np.ndarray:
    """The tokens of a run's ``split`` (its data config and tokenizer; the token cache is reused)."""
    from src.data.datamodule import LMDataModule, build_datamodule

    block = int(cfg.get("block_size") or cfg["model"]["max_seq_len"])
    dm = build_datamodule(cfg["data"], tokenizer, block_size=block, batch_size=1, seed=int(cfg.get("seed", 0)))
    if not isinstance(dm, LMDataModule):
        raise ValueError(f"data={cfg['data'].get('name')} yields sentence pairs, not a text; extrapolation needs a text "
                         f"source (or pass --text FILE)")
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
    raise FileNotFoundError(f"no {which} checkpoint in {ckpts} (found: {', '.join(found) or 'nothing'}); "
                            f"give a .ckpt path or --ckpt last|best")


def main(argv: Sequence[str] | None = None) -> list[LengthResult]:
    parser = argparse.ArgumentParser(prog="python -m src.evaluation.extrapolation",
                                     description="Perplexity of a trained checkpoint at multiples of its training length.")
    parser.add_argument("path", help="a run directory (uses checkpoints/last.ckpt) or a .ckpt file")
    parser.add_argument("--ckpt", choices=("last", "best"), default="last", help="which checkpoint of a run directory")
    parser.add_argument("--factors", type=float, nargs="+", default=list(DEFAULT_FACTORS))
    parser.add_argument("--stride", type=int, default=None, help="window stride (default: disjoint windows)")
    parser.add_argument("--max-tokens", type=int, default=None, help="cap on the evaluated span (tokens)")
    parser.add_argument("--train-length", type=int, default=None, help="default: the run's block_size")
    parser.add_argument("--split", default="val", help="split of the run's data source (default val)")
    parser.add_argument("--text", default=None, help="evaluate this text file instead of the run's split")
    parser.add_argument("--no-write", action="store_true", help="print only; do not update the run's metrics.json")
    args = parser.parse_args(argv)

    from src.reliability.checkpoint_load import load_checkpoint

    ckpt, run_dir = resolve_checkpoint(args.path, args.ckpt)
    loaded = load_checkpoint(ckpt)
    train_length = args.train_length or int(loaded.cfg.get("block_size") or loaded.cfg["model"]["max_seq_len"])
    if args.text:
        assert loaded.tokenizer is not None, "the checkpoint has no tokenizer"
        tokens = np.asarray(loaded.tokenizer.encode(Path(args.text).read_text()), dtype=np.int64)
    else:
        tokens = validation_tokens(loaded.cfg, loaded.tokenizer, args.split)
    results = evaluate_lengths(loaded.model, tokens, train_length, args.factors, args.stride, args.max_tokens)
    print(f"{ckpt} (trained at {train_length} tokens)\n{format_table(results)}")
    if not args.no_write:
        write_results(run_dir, results, train_length, {"checkpoint": str(ckpt), "stride": args.stride})
        update_json(run_dir / METRICS, metrics_from(results, train_length))
        print(f"wrote {run_dir / FILENAME} and extrapolation/* in {run_dir / 'metrics.json'}")
    return results


if __name__ == "__main__":
    main()
