"""Framework overhead: steps/s of ``src.train`` (Hydra config, Lightning Trainer,
datamodule, task, logging, progress bar, throughput monitor) vs a bare PyTorch loop
doing the same training on the same model, optimiser, schedule and batches.

* framework: ``src.training.runner.train(cfg)`` — exactly what ``python -m src.train``
  runs — with the config composed from ``conf/train.yaml`` (default callbacks and CSV
  logger, validation and test off) plus a timing callback (``+callbacks.bench_timer``);
  steady state = wall time between the start of batch ``warmup`` and of batch
  ``warmup + steps``, so setup, compilation of nothing, and checkpointing are excluded;
* bare loop: the same datamodule's training loader, ``model(x)`` + cross-entropy,
  backward, grad-norm clipping at 1.0 (as ``trainer.gradient_clip_val``), AdamW
  (``src.optim``), LR scheduler step — nanoGPT's loop.

Repeats alternate framework / bare; the median steady-state step time is reported.
Overhead = framework step time / bare step time − 1 (target ≤ 5%).

    python perf/framework_overhead.py          # GPT-2-shaped 4 layers d 256 T 256 B 4, and the tiny quickstart model
    python perf/framework_overhead.py --shapes "tiny, char vocab" --profile "tiny, char vocab"   # + where the ms go
    python perf/framework_overhead.py --quick  # smoke run
"""

from __future__ import annotations

import cProfile
import pstats
import tempfile
import time
from pathlib import Path

import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402

from perf.common import (
    REPO_ROOT,
    base_parser,
    machine_header,
    median,
    setup,
    spread,
    table,
    verdict,
)  # noqa: E402

TARGET = 1.05  # framework step time / bare step time

# name -> (n_layer, d_model, n_head, T, B, tokenizer)
SHAPES = {
    "gpt2-4L-256": (4, 256, 4, 256, 4, "gpt2"),
    "tiny (quickstart)": (2, 64, 4, 64, 16, "gpt2"),
    # characters: ~100-token vocabulary, a step of a few ms, so the framework's fixed cost per step shows
    "tiny, char vocab": (2, 64, 4, 64, 16, "char"),
    # the issue's "step of about 40 ms" on an idle core (round 2's tiny step took that under load)
    "d128, char vocab": (2, 128, 4, 64, 16, "char"),
    "toy": (2, 64, 4, 32, 2, "char"),  # --quick
}


class StepTimer(pl.Callback):
    """Records (wall, process CPU) time at the start of every training batch (class-level,
    read back by the benchmark); with ``profile_window = (first, last)`` set, a ``cProfile``
    profile runs from the start of batch ``first`` to the start of batch ``last``."""

    starts: list[tuple[float, float]] = []
    profile_window: tuple[int, int] | None = None
    profiler: cProfile.Profile | None = None

    def __init__(self) -> None:
        StepTimer.starts = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:  # noqa: ANN001
        i = len(StepTimer.starts)
        if (
            StepTimer.profile_window is not None
            and i == StepTimer.profile_window[1]
            and StepTimer.profiler
        ):
            StepTimer.profiler.disable()
        StepTimer.starts.append((time.perf_counter(), time.process_time()))
        if StepTimer.profile_window is not None and i == StepTimer.profile_window[0]:
            StepTimer.profiler = cProfile.Profile()
            StepTimer.profiler.enable()


def parse_args(argv: list[str] | None = None):
    p = base_parser(__doc__.split("\n")[0])
    p.add_argument(
        "--shapes",
        default="gpt2-4L-256;tiny (quickstart);tiny, char vocab",
        help=f"semicolon-separated, from: {'; '.join(SHAPES)}",
    )
    p.add_argument(
        "--steps", type=int, default=None, help="timed steps per repeat (default per shape)"
    )
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument(
        "--profile",
        default=None,
        metavar="SHAPE",
        help="also profile (cProfile) one framework run and one bare run of this shape and print where "
        "the milliseconds of a step go",
    )
    p.add_argument("--profile-rows", type=int, default=30)
    args = p.parse_args(argv)
    if args.quick:
        args.shapes, args.steps, args.warmup = "toy", 3, 1
    args.repeats = args.repeats or (1 if args.quick else 3)
    if args.profile is not None and args.profile not in SHAPES:
        p.error(f"--profile {args.profile!r}: choose from {'; '.join(SHAPES)}")
    return args


def compose(
    shape: tuple[int, int, int, int, int, str], max_steps: int, run_dir: Path, cache_dir: Path
):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    L, C, H, T, B, tok = shape
    overrides = [
        f"tokenizer={tok}",
        "model=gpt2_small",
        f"model.n_layer={L}",
        f"model.d_model={C}",
        f"model.n_head={H}",
        f"model.d_ff={4 * C}",
        f"model.max_seq_len={T}",
        f"block_size={T}",
        f"batch_size={B}",
        "data=embedded",
        f"data.cache_dir={cache_dir}",
        "trainer=cpu",
        f"trainer.max_steps={max_steps}",
        "trainer.limit_val_batches=0",
        f"trainer.val_check_interval={max_steps}",
        "trainer.enable_model_summary=false",
        "test=false",
        f"paths.output_dir={run_dir}",
        f"paths.root_dir={run_dir}",
        "+callbacks.bench_timer._target_=perf.framework_overhead.StepTimer",
    ]
    with initialize_config_dir(config_dir=str(REPO_ROOT / "conf"), version_base="1.3"):
        return hydra_compose(config_name="train", overrides=overrides)


def framework_run(cfg, warmup: int, steps: int) -> tuple[float, float]:
    """(wall, CPU) seconds per step (steady state) of ``src.training.runner.train``."""
    from perf.framework_overhead import (
        StepTimer as timer,
    )  # the class Hydra instantiated (not __main__'s)
    from src.training.runner import train

    train(cfg)
    s = timer.starts
    assert len(s) == warmup + steps + 1, (
        f"expected {warmup + steps + 1} training batches, timed {len(s)}"
    )
    (w0, c0), (w1, c1) = s[warmup], s[warmup + steps]
    return (w1 - w0) / steps, (c1 - c0) / steps


def bare_run(
    cfg, warmup: int, steps: int, profiler: cProfile.Profile | None = None
) -> tuple[float, float]:
    """(wall, CPU) seconds per step of a plain loop over the same pieces (profiled over the
    timed steps when ``profiler`` is given)."""
    from src.config.validate import validate_run_config
    from src.training.runner import configure_backends
    from src.training.setup import build_run

    spec = validate_run_config(cfg)
    configure_backends(spec)
    run = build_run(spec)  # same tokenizer, datamodule and model construction (seeded alike)
    model = run.task.model.train()
    dm = run.datamodule
    dm.prepare_data()
    dm.setup("fit")
    opt = spec.optimizer.build(model, torch.device("cpu"))  # the run's typed configs
    sched = spec.schedule.build(opt, float(spec.optimizer.lr), int(run.cfg["trainer"]["max_steps"]))
    it = iter(dm.train_dataloader())
    t0 = c0 = 0.0
    for i in range(warmup + steps):
        if i == warmup:
            t0, c0 = time.perf_counter(), time.process_time()
            if profiler is not None:
                profiler.enable()
        tokens = next(it)["tokens"]  # [B, T+1]
        loss = model(tokens[:, :-1], labels=tokens).loss  # what src.objectives.causal_lm computes
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if sched is not None:
            sched.step()
        opt.zero_grad(set_to_none=True)
    if profiler is not None:
        profiler.disable()
    return (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps


def _where(path: str) -> str:
    """A profile row's file, shortened: ``lightning/…``, ``src/…``, ``torch/…``."""
    for marker in ("site-packages/", str(REPO_ROOT) + "/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def profile(args, name: str, tmp: Path) -> dict:
    """cProfile of the steady-state steps of one framework run and one bare run of shape ``name``:
    the per-step milliseconds of the largest cumulative entries (the profiler's own cost inflates
    Python-heavy code, so read the framework-only rows against each other and the two totals)."""
    steps = args.steps or 200
    cfg = compose(SHAPES[name], args.warmup + steps + 1, tmp / "profile", tmp / "cache")
    from perf.framework_overhead import (
        StepTimer as timer,
    )  # the class Hydra instantiates (not __main__'s)

    timer.profile_window = (args.warmup, args.warmup + steps)
    try:
        fw_wall, _ = framework_run(cfg, args.warmup, steps)
        fw_prof = timer.profiler
    finally:
        timer.profile_window, timer.profiler = None, None
    bare_prof = cProfile.Profile()
    bare_wall, _ = bare_run(cfg, args.warmup, steps, bare_prof)
    assert fw_prof is not None
    stats = pstats.Stats(
        fw_prof
    ).stats  # {(file, line, func): (calls, ncalls, tottime, cumtime, callers)}
    bare = {k: v[3] for k, v in pstats.Stats(bare_prof).stats.items()}
    rows = []
    for (path, line, func), (_, ncalls, tottime, cumtime, _) in sorted(
        stats.items(), key=lambda kv: -kv[1][3]
    ):
        if len(rows) >= args.profile_rows:
            break
        where = f"{_where(path)}:{line}" if line else "(built-in)"
        bare_ms = bare.get((path, line, func))
        rows.append(
            [
                func,
                where,
                f"{ncalls / steps:.3g}",
                f"{1e3 * cumtime / steps:.3f}",
                f"{1e3 * tottime / steps:.3f}",
                "-" if bare_ms is None else f"{1e3 * bare_ms / steps:.3f}",
            ]
        )
    print(f"\n### Profile: {name}, {steps} steady-state steps, cProfile (ms per step)\n")
    print(
        f"- profiled step: framework {1e3 * fw_wall:.2f} ms, bare loop {1e3 * bare_wall:.2f} ms "
        f"(the profiler's cost included; unprofiled figures in the table above)\n"
    )
    print(
        table(
            [
                "function",
                "where",
                "calls/step",
                "framework cum ms",
                "framework self ms",
                "bare cum ms",
            ],
            rows,
        )
    )
    return {"framework_s": fw_wall, "bare_s": bare_wall, "stats": stats}


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    setup(args)
    import logging
    import warnings

    lightning_log = logging.getLogger("lightning.pytorch")
    level = lightning_log.level
    lightning_log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _run(args)
    finally:
        lightning_log.setLevel(level)


def _run(args) -> dict:
    rows, result = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.shapes.split(";"):
            shape = SHAPES[name]
            steps = args.steps or {"gpt2": 8 if shape[1] >= 256 else 40, "char": 200}[shape[5]]
            times: dict[str, list[tuple[float, float]]] = {"framework": [], "bare": []}
            for r in range(args.repeats):
                cfg = compose(
                    shape, args.warmup + steps + 1, Path(tmp) / f"run{r}", Path(tmp) / "cache"
                )
                order = ("framework", "bare") if r % 2 == 0 else ("bare", "framework")
                for who in order:
                    if who == "framework":
                        times[who].append(framework_run(cfg, args.warmup, steps))
                    else:
                        times[who].append(bare_run(cfg, args.warmup, steps))
            wall = {k: [w for w, _ in v] for k, v in times.items()}
            cpu = {k: [c for _, c in v] for k, v in times.items()}
            fw, bare = median(wall["framework"]), median(wall["bare"])
            fw_cpu, bare_cpu = median(cpu["framework"]), median(cpu["bare"])
            L, C, H, T, B, tok = shape
            result[name] = {
                "framework_s": fw,
                "bare_s": bare,
                "ratio": fw / bare,
                "framework_cpu_s": fw_cpu,
                "bare_cpu_s": bare_cpu,
                "cpu_ratio": fw_cpu / bare_cpu,
            }
            rows.append(
                [
                    name,
                    f"{L}L d{C} T{T} B{B}, {tok}",
                    1 / fw,
                    spread(wall["framework"]),
                    1 / bare,
                    spread(wall["bare"]),
                    f"{100 * (fw / bare - 1):+.1f}%",
                    f"{100 * (fw_cpu / bare_cpu - 1):+.1f}%",
                    f"{1e3 * (fw_cpu - bare_cpu):+.1f}",
                ]
            )
    print(
        machine_header(
            "Framework overhead: src.train (Hydra + Lightning) vs a bare PyTorch loop",
            {
                "framework": "src.training.runner.train(cfg), conf/train.yaml + trainer=cpu, default callbacks "
                "(checkpoint, rich progress bar + tok/s, ThroughputMonitor, LR monitor), CSV logger, "
                "validation/test off",
                "bare loop": "same datamodule batches, forward + cross-entropy, backward, clip 1.0, AdamW, cosine LR",
                "timing": f"steady state after {args.warmup} warm-up steps; median of {args.repeats} alternating repeats; "
                "overhead by wall time and by this process's CPU time (robust to other processes' load)",
            },
        )
    )
    print()
    print(
        table(
            [
                "model",
                "shape",
                "framework steps/s",
                "spread",
                "bare steps/s",
                "spread",
                "overhead (wall)",
                "overhead (CPU)",
                "CPU ms/step",
            ],
            rows,
        )
    )
    print()
    for name, r in result.items():
        print(
            f"{name}: framework/bare step time, wall {verdict(r['ratio'], TARGET, higher_is_better=False)}; "
            f"CPU {verdict(r['cpu_ratio'], TARGET, higher_is_better=False)}"
        )
    if args.profile:
        with tempfile.TemporaryDirectory() as tmp:
            result["profile"] = profile(args, args.profile, Path(tmp))
    return result


if __name__ == "__main__":
    main()
