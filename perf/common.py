"""What every benchmark shares: the machine header, interleaved timing, markdown tables,
and a transformers GPT-2 carrying exactly our weights.

Timing rule: a benchmark compares a subject against a *peer measured in the same
process*, the two interleaved (A B A B …) and summarised by the median of several
repeats, so that load from other processes on a shared machine hits both alike.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[1]
import torch  # noqa: E402
from torch import nn  # noqa: E402

from src.provenance import cpu_model, package_version  # noqa: E402

SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


# -- command line -------------------------------------------------------------------
def base_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument(
        "--quick", action="store_true", help="toy sizes, a few seconds (the smoke tests use it)"
    )
    p.add_argument(
        "--repeats", type=int, default=None, help="timed repeats per subject (median reported)"
    )
    p.add_argument(
        "--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)"
    )
    p.add_argument("--seed", type=int, default=0)
    return p


def add_shape_args(p: argparse.ArgumentParser, *, batch: int, seq_len: int | None = 256) -> None:
    """The GPT-2-shaped model every benchmark builds: --layers, --d-model, --heads, --batch
    (and --seq-len when the benchmark has a fixed sequence length)."""
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    if seq_len is not None:
        p.add_argument("--seq-len", type=int, default=seq_len)
    p.add_argument("--batch", type=int, default=batch)


def setup(args: argparse.Namespace) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)


# -- machine and versions -------------------------------------------------------------
def _version(dist: str) -> str:
    """Installed version of a distribution, without importing it (importing lightning takes seconds)."""
    return package_version(dist) or "-"


def machine_header(title: str, extra: dict[str, Any] | None = None) -> str:
    """A few lines naming the benchmark, the machine and the versions."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    if torch.cuda.is_available():
        device = f"cuda: {torch.cuda.get_device_name(0)}"
    else:
        device = "cpu (no GPU)"
    lines = [
        f"## {title}",
        "",
        f"- machine: {cpu_model() or platform.machine()}, {cores} usable cores, torch threads {torch.get_num_threads()}, {device}",
        f"- versions: python {platform.python_version()}, torch {torch.__version__}, "
        f"transformers {_version('transformers')}, lightning {_version('lightning')}",
    ]
    try:
        load = os.getloadavg()[0]
        if load > cores:
            lines.append(
                f"- load: 1-minute load average {load:.1f} on {cores} cores (shared machine): absolute "
                f"timings are noisy; the ratios compare peers measured interleaved in this process"
            )
    except OSError:  # pragma: no cover
        pass
    for k, v in (extra or {}).items():
        lines.append(f"- {k}: {v}")
    return "\n".join(lines)


# -- timing -------------------------------------------------------------------------------
def interleaved(
    subjects: dict[str, Callable[[], Any]], repeats: int, warmup: int = 1
) -> dict[str, list[float]]:
    """Run each subject ``warmup`` times, then ``repeats`` rounds of A, B, … (order rotated
    each round); return the wall-clock seconds of every timed call, per subject."""
    for fn in subjects.values():
        for _ in range(warmup):
            fn()
    names = list(subjects)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        for n in order:
            t0 = time.perf_counter()
            subjects[n]()
            times[n].append(time.perf_counter() - t0)
    return times


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def spread(xs: Sequence[float]) -> str:
    """Relative half-range of the repeats, e.g. '±4%'."""
    if len(xs) < 2:
        return "-"
    m = statistics.median(xs)
    return f"±{50 * (max(xs) - min(xs)) / m:.0f}%" if m else "-"


# -- tables -------------------------------------------------------------------------------
def fmt(x: Any) -> str:
    if isinstance(x, float):
        if x != x:  # nan
            return "-"
        if abs(x) >= 1000:
            return f"{x:,.0f}"
        if abs(x) >= 10:
            return f"{x:.1f}"
        return f"{x:.3g}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x)


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table (pastes straight into docs/performance.md)."""
    cells = [[fmt(c) for c in row] for row in rows]
    widths = [
        max(len(str(h)), *(len(r[i]) for r in cells)) if cells else len(str(h))
        for i, h in enumerate(columns)
    ]
    line = lambda vals: "| " + " | ".join(str(v).ljust(w) for v, w in zip(vals, widths)) + " |"  # noqa: E731
    out = [line(columns), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in cells]
    return "\n".join(out)


def verdict(ratio: float, target: float, higher_is_better: bool = True) -> str:
    ok = ratio >= target if higher_is_better else ratio <= target
    sign = "≥" if higher_is_better else "≤"
    return f"{ratio:.2f}× (target {sign} {target:g}×: {'met' if ok else 'MISSED'})"


# -- the same GPT-2 in transformers --------------------------------------------------------
def gpt2_config_dict(
    n_layer: int, d_model: int, n_head: int, seq_len: int, vocab: int = 50257, **kw: Any
) -> dict[str, Any]:
    """Our config for a GPT-2-shaped decoder (GPT-2 small at 12/768/12/1024)."""
    d = {
        "family": "decoder_only",
        "vocab_size": vocab,
        "d_model": d_model,
        "n_layer": n_layer,
        "n_head": n_head,
        "d_ff": 4 * d_model,
        "max_seq_len": seq_len,
        "dropout": 0.0,
        "bias": True,
        "tie_embeddings": True,
        "norm_placement": "pre",
        "position": {"name": "learned"},
        "norm": {"name": "layernorm", "eps": 1e-5},
        "ffn": {"name": "gelu", "approximate": "tanh"},
        "mask": {"name": "causal"},
        "name": f"gpt2-{n_layer}L-{d_model}",
    }
    d.update(kw)
    return d


def hf_gpt2_like(model: nn.Module, attn_implementation: str = "sdpa") -> nn.Module:
    """transformers' ``GPT2LMHeadModel`` holding exactly the weights of our decoder-only
    GPT-2 (``model``): Conv1D stores [in, out], so our Linear weights are transposed."""
    from transformers import GPT2Config, GPT2LMHeadModel

    c = model.config
    if c.padded_vocab_size != c.vocab_size:
        raise ValueError(
            "compare against transformers with vocab_pad_multiple=1 (GPT-2 has 50257 rows)"
        )
    hf_cfg = GPT2Config(
        vocab_size=c.vocab_size,
        n_positions=c.max_seq_len,
        n_embd=c.d_model,
        n_layer=c.n_layer,
        n_head=c.n_head,
        n_inner=c.d_ff,
        activation_function="gelu_new",
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        layer_norm_epsilon=c.norm.get("eps", 1e-5),
        tie_word_embeddings=True,
        bos_token_id=min(50256, c.vocab_size - 1),
        eos_token_id=min(50256, c.vocab_size - 1),
    )
    hf = GPT2LMHeadModel._from_config(hf_cfg, attn_implementation=attn_implementation)
    ours = model.state_dict()
    sd: dict[str, torch.Tensor] = {
        "transformer.wte.weight": ours["tok_embed.weight"],
        "transformer.wpe.weight": ours["decoder.position.table.weight"],
        "transformer.ln_f.weight": ours["decoder.final_norm.weight"],
        "transformer.ln_f.bias": ours["decoder.final_norm.bias"],
    }
    for i in range(c.n_layer):
        o, h = f"decoder.blocks.{i}.", f"transformer.h.{i}."
        for ours_name, hf_name, transpose in (
            ("attn_norm", "ln_1", False),
            ("ffn_norm", "ln_2", False),
            ("attn.qkv", "attn.c_attn", True),
            ("attn.out", "attn.c_proj", True),
            ("ffn.up", "mlp.c_fc", True),
            ("ffn.down", "mlp.c_proj", True),
        ):
            w = ours[o + ours_name + ".weight"]
            sd[h + hf_name + ".weight"] = w.t().contiguous() if transpose else w
            sd[h + hf_name + ".bias"] = ours[o + ours_name + ".bias"]
    missing, unexpected = hf.load_state_dict(sd, strict=False)
    missing = [
        k
        for k in missing
        if k != "lm_head.weight" and not k.endswith(".attn.bias") and not k.endswith("masked_bias")
    ]
    if missing or unexpected:
        raise RuntimeError(
            f"weight copy into GPT2LMHeadModel: missing {missing}, unexpected {unexpected}"
        )
    hf.tie_weights()
    assert hf.lm_head.weight.data_ptr() == hf.transformer.wte.weight.data_ptr(), (
        "lm_head is not tied"
    )
    return hf


def check_same_logits(
    model: nn.Module, hf: nn.Module, vocab: int, seq_len: int, tol: float = 1e-3
) -> float:
    """Max |Δlogit| between our model and the transformers copy on random ids (raises above tol)."""
    ids = torch.randint(0, vocab, (2, min(seq_len, 32)))
    with torch.no_grad():
        a = model(ids).logits
        b = hf(input_ids=ids).logits
    diff = float((a - b).abs().max())
    if diff > tol:
        raise RuntimeError(
            f"our model and the transformers copy disagree: max |Δlogit| = {diff:.3g}"
        )
    return diff


# -- peak memory of a fresh process --------------------------------------------------------
def rss_bytes() -> int:
    """Current resident set size of this process (Linux /proc; 0 elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def peak_rss_bytes() -> int:
    """High-water mark of the resident set size (``ru_maxrss``) of this process."""
    import resource

    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb if sys.platform == "darwin" else kb * 1024


def mib(n: float) -> float:
    return n / 2**20
