"""Time to nanoGPT's loss: our ``experiment=shakespeare_char`` (or the experiment ``--ours`` names,
e.g. ``experiment=shakespeare_char_speedrun``) against nanoGPT's own ``train.py`` on its CPU
recipe, the two started together with one thread each.

nanoGPT (karpathy/nanoGPT, MIT, at commit 3adf61e: ``python -m src.prepare shared-data --out
../shared --only nanogpt tinyshakespeare`` fetches it and the text) runs from
``../shared/anchors/nanogpt`` as it is, with the CPU
flags of its README (``config/train_shakespeare_char.py --device=cpu --compile=False
--eval_iters=20 --log_interval=1 --block_size=64 --batch_size=12 --n_layer=4 --n_head=4
--n_embd=128 --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0``). None of its code is
copied: a scratch directory holds links to its ``configurator.py`` (which ``train.py`` reads
from the working directory) and to its ``data/shakespeare_char/prepare.py``, beside a link to
the same ``input.txt`` we train on; its ``prepare.py`` writes ``train.bin``/``val.bin``/
``meta.pkl`` there, and its ``train.py`` runs with that directory as working directory.

Ours: ``python -m src.train experiment=shakespeare_char data.path=<input.txt> test=false`` and the
``--ours`` overrides (levers such as ``compile=false``; by default the experiment's own choices).
An ``experiment=<name>`` among them replaces ``shakespeare_char``. ``test=false`` because nanoGPT
has no test pass. Both write checkpoints. With ``shakespeare_char`` both evaluate every 250 steps
on 20 batches (nanoGPT also on 20 training batches, and at step 0), each on its own split
(nanoGPT: random windows of the last 10% of the text; ours: the first 20 batches of fixed
windows of the 5% after the training text), as each framework's user would read it.
``shakespeare_char_speedrun`` validates on nanoGPT's own val text (``data.val_text=nanogpt``: all
of the last 10% of input.txt, every fixed window of it) at its own cadence; its iterations are
its own (``--max-iters`` then sets nanoGPT's only).

Measured per process, from launch to exit: wall time, CPU time (``os.wait4``), and the wall
time at which it first reported a validation loss <= ``--target-loss`` (nanoGPT's ``step N:
train loss …, val loss …`` lines; ours through ``ValidationClock``, one printed line per
validation). The ratio is ours over nanoGPT's time to that loss (nanoGPT's time to its last
evaluation if it never reaches it). Target: ours reaches 1.89 in <= 0.8x the time
(``shakespeare_char``: the same recipe), <= 0.5x (``shakespeare_char_speedrun``, issue 25).

    python perf/nanogpt_side_by_side.py                     # one pair, ~5 min on 2 idle cores
    python perf/nanogpt_side_by_side.py --repeats 3         # median of 3 pairs
    python perf/nanogpt_side_by_side.py --ours "compile=false optim.fused=false"   # a lever off
    python perf/nanogpt_side_by_side.py --quick             # 20 iterations each (smoke run)
    python perf/nanogpt_side_by_side.py --ours experiment=shakespeare_char_speedrun   # the speedrun
"""

from __future__ import annotations

import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import lightning.pytorch as pl
import torch

from perf.common import REPO_ROOT, SHARED_DATA, base_parser, machine_header, table, verdict

ANCHOR = REPO_ROOT.parent / "shared" / "anchors" / "nanogpt"
TEXT = SHARED_DATA / "tinyshakespeare" / "input.txt"
TARGET_LOSS = 1.89
EXPERIMENT = "shakespeare_char"  # nanoGPT's recipe, in this framework
#: ours / nanoGPT, time to the target loss, by experiment (another experiment: pass --target-ratio)
TARGET_RATIOS = {"shakespeare_char": 0.8, "shakespeare_char_speedrun": 0.5}
# nanoGPT README's CPU recipe ("I only have a macbook"); --max_iters/--lr_decay_iters come from --max-iters
NANOGPT_FLAGS = [
    "--device=cpu",
    "--compile=False",
    "--eval_iters=20",
    "--log_interval=1",
    "--block_size=64",
    "--batch_size=12",
    "--n_layer=4",
    "--n_head=4",
    "--n_embd=128",
    "--dropout=0.0",
]
NANOGPT_VAL = re.compile(r"^step (\d+): train loss ([\d.]+), val loss ([\d.]+)")
OURS_VAL = re.compile(r"^\[val\] step (\d+) val/loss ([\d.naninf]+)")


class ValidationClock(pl.Callback):
    """Prints ``[val] step N val/loss X`` after each validation of a fit (one host read per validation,
    as ``RunSummary`` does anyway), so the side-by-side can stamp when our run reached a loss."""

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        value = trainer.callback_metrics.get("val/loss")
        if trainer.sanity_checking or value is None or not trainer.is_global_zero:
            return
        print(f"[val] step {trainer.global_step} val/loss {float(value):.4f}", flush=True)


@dataclass
class Result:
    """One process of a pair."""

    name: str
    command: list[str]
    returncode: int | None = None
    wall_s: float = float("nan")
    cpu_s: float = float("nan")
    # (wall s since launch, step, val loss)
    evals: list[tuple[float, int, float]] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)

    def time_to(self, loss: float) -> float | None:
        return next((t for t, _, v in self.evals if v <= loss), None)

    @property
    def last_loss(self) -> float:
        return self.evals[-1][2] if self.evals else float("nan")

    @property
    def best_loss(self) -> float:
        return min((v for _, _, v in self.evals), default=float("nan"))


def parse_args(argv: list[str] | None = None):
    p = base_parser(__doc__.split("\n")[0])
    p.add_argument(
        "--anchor",
        type=Path,
        default=ANCHOR,
        help="nanoGPT's files (train.py, model.py, configurator.py …)",
    )
    p.add_argument(
        "--text", type=Path, default=TEXT, help="Tiny Shakespeare input.txt (both runs read it)"
    )
    p.add_argument("--max-iters", type=int, default=2000)
    p.add_argument(
        "--ours", default="", help="extra Hydra overrides for our run (the levers), space-separated"
    )
    p.add_argument("--target-loss", type=float, default=TARGET_LOSS)
    p.add_argument(
        "--target-ratio",
        type=float,
        default=None,
        help=f"ours/nanoGPT time to reach (default by experiment: {TARGET_RATIOS})",
    )
    p.add_argument(
        "--sequential", action="store_true", help="run nanoGPT, then ours (default: both at once)"
    )
    p.add_argument("--pin", action="store_true", help="pin nanoGPT to core 0 and ours to core 1")
    p.add_argument(
        "--warm-compile-cache",
        action="store_true",
        help="reuse torch.compile's cache across runs (default: a fresh one per run, so compile time counts)",
    )
    p.add_argument(
        "--timeout", type=float, default=3600, help="seconds per pair before both are stopped"
    )
    args = p.parse_args(argv)
    if args.quick:
        args.max_iters = 20
    args.repeats = args.repeats or 1
    args.experiment, args.ours_overrides = split_experiment(args.ours)
    if args.target_ratio is None:
        if args.experiment not in TARGET_RATIOS:
            p.error(
                f"--ours experiment={args.experiment} has no default target ratio (known: "
                f"{', '.join(TARGET_RATIOS)}); pass --target-ratio"
            )
        args.target_ratio = TARGET_RATIOS[args.experiment]
    return args


def split_experiment(ours: str) -> tuple[str, list[str]]:
    """``--ours`` -> (the experiment, the other overrides): ``experiment=<name>`` among them picks our
    recipe (default ``shakespeare_char``); named twice is an error."""
    tokens = shlex.split(ours)
    named = [t.split("=", 1)[1] for t in tokens if t.startswith("experiment=")]
    if len(named) > 1:
        raise SystemExit(
            f"--ours names experiment= {len(named)} times ({', '.join(named)}); give one"
        )
    return (named[0] if named else EXPERIMENT), [
        t for t in tokens if not t.startswith("experiment=")
    ]


def skip_reason(args) -> str | None:
    if not (args.anchor / "train.py").is_file():
        return (
            f"nanoGPT's train.py is not at {args.anchor}: fetch karpathy/nanoGPT at commit "
            "3adf61e (python -m src.prepare shared-data --out ../shared --only nanogpt "
            "tinyshakespeare), or pass --anchor"
        )
    if not args.text.is_file():
        return f"Tiny Shakespeare is not at {args.text} (pass --text)"
    return None


def prepare_nanogpt(args, work: Path) -> Path:
    """A working directory for nanoGPT's train.py: links to its own files, its prepare.py's output."""
    data = work / "data" / "shakespeare_char"
    data.mkdir(parents=True)
    (work / "configurator.py").symlink_to(args.anchor / "configurator.py")
    (data / "prepare.py").symlink_to(args.anchor / "data" / "shakespeare_char" / "prepare.py")
    (data / "input.txt").symlink_to(args.text.resolve())
    r = subprocess.run(
        [sys.executable, str(data / "prepare.py")], cwd=work, capture_output=True, text=True
    )
    if r.returncode or not (data / "train.bin").is_file():
        raise RuntimeError(f"nanoGPT's prepare.py failed:\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
    return work


def commands(args, work: Path, r: int) -> dict[str, list[str]]:
    n = args.max_iters
    ng = [
        sys.executable,
        "-u",
        str(args.anchor / "train.py"),
        str(args.anchor / "config" / "train_shakespeare_char.py"),
        *NANOGPT_FLAGS,
        f"--max_iters={n}",
        f"--lr_decay_iters={n}",
        f"--out_dir={work / f'out-nanogpt-{r}'}",
    ]
    # nanoGPT's recipe: its horizon follows nanoGPT's iterations
    own = args.experiment == EXPERIMENT
    ours = [
        sys.executable,
        "-m",
        "src.train",
        f"experiment={args.experiment}",
        f"data.path={args.text.resolve()}",
        "test=false",
        f"hydra.run.dir={work / f'ours-{r}'}",
        "+callbacks.side_by_side_clock._target_=perf.nanogpt_side_by_side.ValidationClock",
    ]
    # the recipe's horizon follows the iterations, as nanoGPT's --lr_decay_iters does
    if own and n != 2000:
        ours += [f"trainer.max_steps={n}", f"scheduler.decay_steps={n}"]
    if args.quick:  # evaluations every 10 steps on 2 batches, so the smoke run sees some
        ng += ["--eval_interval=10", "--eval_iters=2"]
        ours += ["trainer.val_check_interval=10", "trainer.limit_val_batches=2"]
        # another recipe: 20 steps too, with a warmup that fits them (the speedrun's wsd)
        ours += (
            ["~callbacks.sample_text"]
            if own
            else [f"trainer.max_steps={n}", "scheduler.warmup_steps=5"]
        )
    ours += args.ours_overrides
    return {"nanoGPT": ng, "ours": ours}


def _env(work: Path, name: str, warm: bool) -> dict[str, str]:
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
        TORCHINDUCTOR_COMPILE_THREADS="1",
    )  # compile in the run's own process, one thread too
    if not warm:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(work / f"inductor-{name}-{time.monotonic_ns()}")
    return env


def _run(
    res: Result, cwd: Path, env: dict[str, str], core: int | None, pattern: re.Pattern
) -> None:
    """Launch, stamp each validation line, reap with os.wait4 (CPU time of the process and its children)."""
    pre = (lambda: os.sched_setaffinity(0, {core})) if core is not None else None
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        res.command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        preexec_fn=pre,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        now = time.perf_counter() - t0
        res.tail = (res.tail + [line.rstrip()])[-40:]
        m = pattern.match(line.strip())
        if m:
            step, loss = int(m.group(1)), float(m.group(m.lastindex))
            res.evals.append((now, step, loss))
    _, status, usage = os.wait4(proc.pid, 0)
    res.wall_s = time.perf_counter() - t0
    res.cpu_s = usage.ru_utime + usage.ru_stime
    proc.returncode = res.returncode = os.waitstatus_to_exitcode(status)


class LoadSampler(threading.Thread):
    """The 1-minute load average every few seconds while the pair runs."""

    def __init__(self, every: float = 5.0) -> None:
        super().__init__(daemon=True)
        self.every, self.samples, self.stop = every, [], threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.every):
            self.samples.append(os.getloadavg()[0])


def run_pair(args, work: Path, r: int) -> dict[str, Result]:
    cmds = commands(args, work, r)
    results = {k: Result(k, c) for k, c in cmds.items()}
    cwd = {"nanoGPT": work, "ours": REPO_ROOT}
    pattern = {"nanoGPT": NANOGPT_VAL, "ours": OURS_VAL}
    cores = {"nanoGPT": 0, "ours": 1} if args.pin else {"nanoGPT": None, "ours": None}
    order = list(cmds) if r % 2 == 0 else list(cmds)[::-1]  # who is launched first alternates
    threads = [
        threading.Thread(
            target=_run,
            args=(results[k], cwd[k], _env(work, k, args.warm_compile_cache), cores[k], pattern[k]),
        )
        for k in order
    ]
    for t in threads:
        t.start()
        if args.sequential:
            t.join(args.timeout)
    for t in threads:
        t.join(args.timeout)
    for res in results.values():
        if res.returncode != 0:
            raise RuntimeError(
                f"{res.name} exited {res.returncode}: {shlex.join(res.command)}\n"
                + "\n".join(res.tail)
            )
    return results


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    reason = skip_reason(args)
    if reason:
        print(f"nanogpt_side_by_side: skipped: {reason}")
        return {"skipped": reason}
    torch.set_num_threads(1)  # this process only waits (the header names its threads)
    cores = len(os.sched_getaffinity(0))
    load_before = os.getloadavg()[0]
    sampler = LoadSampler()
    sampler.start()
    pairs = []
    with tempfile.TemporaryDirectory(prefix="nanogpt_side_by_side.") as tmp:
        work = prepare_nanogpt(args, Path(tmp))
        for r in range(args.repeats):
            pairs.append(run_pair(args, work, r))
            print(
                f"[pair {r + 1}/{args.repeats}] "
                + "; ".join(
                    f"{k}: val {v.last_loss:.4f}, {v.wall_s:.0f} s wall, {v.cpu_s:.0f} s CPU"
                    for k, v in pairs[-1].items()
                ),
                file=sys.stderr,
                flush=True,
            )
        cmds = commands(args, work, 0)
    sampler.stop.set()
    during = sampler.samples or [os.getloadavg()[0]]
    commit = (
        (args.anchor / "COMMIT").read_text().strip() if (args.anchor / "COMMIT").is_file() else "?"
    )

    def show(cmd: list[str]) -> str:
        return shlex.join([Path(c).name if c == sys.executable else c for c in cmd]).replace(
            str(work), "<tmp>"
        )

    print(
        machine_header(
            f"Time to nanoGPT's loss: experiment={args.experiment} vs nanoGPT's train.py, CPU recipe",
            {
                "nanoGPT": f"karpathy/nanoGPT {commit[:12]} from {args.anchor}: {show(cmds['nanoGPT'])}",
                "ours": show(cmds["ours"]),
                "threads": "one each (OMP_NUM_THREADS=1; ours cpu_threads=1, torch.compile's compiler in-process); "
                + ("run one after the other" if args.sequential else "both started at once")
                + (", pinned to cores 0 / 1" if args.pin else ""),
                "run load": f"1-minute load average {load_before:.1f} before, {statistics.mean(during):.1f} mean / "
                f"{max(during):.1f} max during (the two runs add ~2) on {cores} cores",
                "times": "wall seconds from launch (imports and set-up included) to the first validation at or below "
                f"{args.target_loss}; CPU = user + system of the process and its children",
            },
        )
    )
    print()
    rows, ratios, cpu_ratios, reached = [], [], [], []
    for r, pair in enumerate(pairs):
        ng, ours = pair["nanoGPT"], pair["ours"]
        ng_t = ng.time_to(args.target_loss) or (ng.evals[-1][0] if ng.evals else ng.wall_s)
        ours_t = ours.time_to(args.target_loss)
        reached.append(ours_t is not None)
        ratios.append((ours_t if ours_t is not None else ours.wall_s) / ng_t)
        cpu_ratios.append(ours.cpu_s / ng.cpu_s)
        for res in (ng, ours):
            t = res.time_to(args.target_loss)
            rows.append(
                [
                    r + 1,
                    res.name,
                    f"{res.last_loss:.4f}",
                    f"{res.best_loss:.4f}",
                    "-" if t is None else f"{t:.1f}",
                    f"{res.wall_s:.1f}",
                    f"{res.cpu_s:.1f}",
                    len(res.evals),
                ]
            )
    print(
        table(
            [
                "pair",
                "run",
                "val loss (last)",
                "best",
                f"s to val ≤ {args.target_loss}",
                "wall s",
                "CPU s",
                "evaluations",
            ],
            rows,
        )
    )
    ratio, cpu_ratio = statistics.median(ratios), statistics.median(cpu_ratios)
    last = [p["ours"].last_loss for p in pairs]
    print()
    met = all(reached) and ratio <= args.target_ratio
    judged = verdict(ratio, args.target_ratio, higher_is_better=False)
    if not all(reached):
        judged = f"{ratio:.2f}× (target ≤ {args.target_ratio:g}× at val ≤ {args.target_loss}: MISSED, the loss was not reached)"
    print(
        f"time to nanoGPT's loss (val ≤ {args.target_loss}), ours/nanoGPT, median of {len(pairs)}: {judged}; "
        f"ours reached it in {sum(reached)}/{len(pairs)} run(s) (last val {', '.join(f'{v:.4f}' for v in last)})"
    )
    print(
        f"CPU time ours/nanoGPT: {cpu_ratio:.2f}×; wall time ours/nanoGPT (whole runs): "
        f"{statistics.median(p['ours'].wall_s / p['nanoGPT'].wall_s for p in pairs):.2f}×"
    )
    return {"ratio": ratio, "cpu_ratio": cpu_ratio, "reached": reached, "pairs": pairs, "met": met}


if __name__ == "__main__":
    main()
