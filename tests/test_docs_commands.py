"""Every ``python -m src.train`` command in README.md and docs/*.md runs in minutes on a laptop
CPU, or says on its line that it is GPU-sized (issue 55).

Each command (a line of a ```bash block, backslash continuations joined, or an inline `code`
span) is composed in-process against conf/ as ``src.train`` would compose it (a ``-m`` sweep: the
first value of each swept override, i.e. its first job) and its planned training FLOPs are counted
by the model itself (``Budget.flops_per_step`` x ``trainer.max_steps``, src/training/budget.py).
Nothing trains and no data set is read: the model is built on the meta device and a character
vocabulary that would be fitted on the data stands at 256 symbols. The FLOPs over a CPU rate
measured on the quick start give minutes; a command over ``CPU_MINUTES`` needs ``GPU_MARKER`` in
its line (its trailing comment included), in the prose line that holds an inline span, or in the
sentence right before its code block.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

#: the words a GPU-sized command carries (``# GPU-sized`` after a command in a code block)
GPU_MARKER = "GPU-sized"
#: what "runs in minutes on a laptop CPU" allows, in estimated minutes
CPU_MINUTES = 10.0
#: Effective training FLOP/s of one CPU thread, the whole run counted (imports, startup,
#: validation, test, the text sample). Measured 2026-12-07 on this repository's 2-core AMD EPYC
#: machine: ``OMP_NUM_THREADS=1 /usr/bin/time -v python -m src.train experiment=quickstart``
#: plans 400 steps x 5.315e9 training FLOPs = 2.126e12 (its budget.json) and used 57.5 s of CPU
#: (56.1 s user + 1.4 s system; 126 s wall, as a test suite shared the cores, load average ~4;
#: README.md's ~60 s is the idle wall time) -> 3.7e10 FLOP/s.
CPU_FLOPS_PER_S = 3.7e10

#: Commands of the docs that are not recipes, each with why it is not checked: the file, a piece
#: of the command's source line that picks it out, and the reason.
NOT_RECIPES: list[tuple[str, str, str]] = [
    ("models.md", "| `python -m src.train` |", "names the entry point in a table"),
    ("training.md", "`python -m src.train` is a thin Hydra", "names the entry point"),
    ("studies.md", "**tune** — `python -m src.train -m` over", "says what src.study runs"),
    ("performance.md", "fit of 30 steps through `python -m src.train` (GPT-2", "a GPU measurement"),
    ("reliability.md", "real `python -m src.train` processes", "names the entry point"),
    ("reliability.md", "| two `python -m src.train` with one", "names the entry point"),
    ("performance.md", "model.norm_placment=post", "a typo on purpose: shows the error message"),
    ("performance.md", "model/position=rotary", "a typo on purpose: shows the error message"),
    ("probes.md", "src.train ... callbacks.probes", "'...' stands for the reader's own run"),
    ("studies.md", "src.train -m ... sweep_resume", "'...' stands for the reader's own sweep"),
    ("reliability.md", "model.n_head=5,4 …", "'…' stands for the rest of a tiny run"),
    ("reliability.md", "src.train … +callbacks.faults", "'…' stands for the rest of a tiny run"),
]

#: Overrides whose value does not exist here but does not change the budget, and what stands in:
#: override key -> stand-in value. Data files are replaced by a stand-in file of the same kind
#: (``stand_in_data``), so no data set is read.
STAND_INS: dict[str, str] = {
    "ckpt_path": "null",  # a checkpoint of an earlier run: resuming plans the same steps
    "init_from": "null",
    "scheduler.decay_from": "null",  # the trunk of a cooldown branch
}
#: the reader's own position of README.md's "add a component" recipe, and the one it stands in for
OWN_POSITION, STAND_IN_POSITION = "my_pos", "learned"
#: a sweeper's search space (Optuna's syntax): range/choice give their first value; an interval
#: (or a tag of one) is dropped, so the config's own value stands for the first trial
_SWEEP_FUNCTION = re.compile(r"^(tag|interval|range|choice)\(")

_INLINE = re.compile(r"`([^`]*python -m src\.train[^`]*)`")


@dataclass(frozen=True)
class Command:
    """A ``python -m src.train`` command as a doc writes it."""

    file: str  # README.md or docs/<name>.md
    line: int  # 1-based line of the command's first line
    text: str  # the command, comments dropped, continuations joined
    context: str  # its source lines with their comments, and the sentence right before its block

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def _block_commands(name: str, lines: list[str], start: int, end: int) -> Iterator[Command]:
    """Commands of the code block lines[start:end]; a shell loop's ``$VAR`` takes its first value."""
    lead: list[str] = []
    j = start - 2  # the line above the opening fence
    while j >= 0 and not lines[j].strip():
        j -= 1
    while j >= 0 and lines[j].strip() and not lines[j].startswith("```"):
        lead.insert(0, lines[j])
        j -= 1
    lead_in = re.split(r"(?<=[.!?])\s", " ".join(lead))[-1]  # the sentence right before the block
    loop_values: dict[str, str] = {}
    i = start
    while i < end:
        first = i
        raw = [lines[i]]
        while raw[-1].split("#", 1)[0].rstrip().endswith("\\") and i + 1 < end:
            i += 1
            raw.append(lines[i])
        i += 1
        parts = [r.split("#", 1)[0].rstrip().removesuffix("\\").strip() for r in raw]
        text = " ".join(p for p in parts if p)
        if loop := re.match(r"^for (\w+) in (\S+)", text):
            loop_values[loop.group(1)] = loop.group(2)
        if re.match(r"^(\w+=\S+\s+)*python -m src\.train\b", text):
            for var, value in loop_values.items():
                text = re.sub(rf"\${var}\b", value, text)
            yield Command(name, first + 1, text, "\n".join([lead_in, *raw]))


def doc_commands() -> list[Command]:
    """Every ``python -m src.train`` command of README.md and docs/*.md: the lines of ```bash
    blocks, and inline `code` spans of the prose (a span may cross a line break)."""
    found: list[Command] = []
    for path in DOCS:
        lines = path.read_text().splitlines()
        prose = list(lines)  # the text outside code blocks, line for line
        fence: int | None = None
        for k, line in enumerate(lines):
            if line.startswith("```"):
                if fence is not None and lines[fence - 1].strip() in ("```bash", "```sh"):
                    found.extend(_block_commands(path.name, lines, fence, k))
                fence = None if fence is not None else k + 1
            if fence is not None or line.startswith("```"):
                prose[k] = ""
        # a span lies inside one paragraph (it may cross a line break, not a blank line)
        for para in re.finditer(r"(?:^.+\n?)+", "\n".join(prose), re.M):
            start = para.string.count("\n", 0, para.start())
            for m in _INLINE.finditer(para.group()):
                first = start + para.group().count("\n", 0, m.start())
                last = start + para.group().count("\n", 0, m.end())
                text = " ".join(m.group(1).split())
                found.append(
                    Command(path.name, first + 1, text, "\n".join(lines[first : last + 1]))
                )
    return found


def _picks(entry: tuple[str, str, str], c: Command) -> bool:
    file, piece, _ = entry
    return c.file == file and (piece in c.context or piece in c.text)


def not_a_recipe(c: Command) -> str | None:
    """Why ``c`` is not checked (``NOT_RECIPES``), or None."""
    return next((entry[2] for entry in NOT_RECIPES if _picks(entry, c)), None)


def overrides_of(text: str, data_dir: Path | None = None) -> list[str]:
    """The Hydra overrides of a ``python -m src.train`` command; a ``-m`` sweep gives its first
    job (the first value of each comma-swept override; a bracketed list stays a list). With
    ``data_dir``, what does not exist here stands in (``STAND_INS``, ``stand_in_data``)."""
    words = shlex.split(text)
    words = words[words.index("python") + 3 :]  # python -m src.train
    multirun = "-m" in words or "--multirun" in words
    own_position = f"model/position={OWN_POSITION}" in words
    out: list[str] = []
    for w in words:
        if w in ("-m", "--multirun"):
            continue
        key, _, value = w.partition("=")
        if multirun and _SWEEP_FUNCTION.match(value):
            first = re.match(r"^(?:range|choice)\(([^,)]+)", value)
            if first is None:
                continue
            value = first.group(1)
        elif multirun and "," in value and not value.startswith(("[", "{")):
            if not key.startswith("hydra"):
                value = value.split(",", 1)[0]
        if data_dir is not None:
            if key in ("data.path", "data.paths"):
                value = stand_in_data(value, data_dir)
            elif own_position and key.startswith("model.position."):
                continue
            elif own_position and key == "model/position":
                value = STAND_IN_POSITION
            elif key in STAND_INS:
                value = STAND_INS[key]
        out.append(f"{key}={value}" if "=" in w else w)
    # placeholders inside a value (a run directory written as <tmp>): any path does
    return [re.sub(r"<[^>]*>|…", "x", w) for w in out]


def stand_in_data(value: str, data_dir: Path) -> str:
    """A stand-in file (or directory, for a trailing ``/``) of the kind each data path names."""

    def one(path: str) -> str:
        name = path.rstrip("/").replace("/", "_").replace(".", "_")
        stand_in = data_dir / name
        if path.endswith("/"):
            stand_in.mkdir(exist_ok=True)
            (stand_in / "a.txt").write_text("stand-in text\n")
            return str(stand_in)
        suffix = Path(path).suffix or ".txt"
        stand_in = stand_in.with_suffix(suffix)
        line = '{"text": "stand-in", "body": "stand-in"}' if suffix == ".jsonl" else "stand-in"
        stand_in.write_text(line + "\n")
        return str(stand_in)

    if value.startswith("["):
        return "[" + ",".join(one(p) for p in value.strip("[]").split(",")) + "]"
    return one(value)


def planned_flops(cfg: DictConfig) -> float:
    """Training FLOPs of the run ``cfg`` plans (``trainer.max_steps`` optimizer steps), counted by
    the model on its nominal batch (``training_budget``) as ``build_run`` would build it, with
    the model on the meta device and no data read."""
    from src.config.spec import resolve, thaw
    from src.config.trainer_checks import Hardware
    from src.config.validate import validate_run_config
    from src.data.datamodule import datamodule_for
    from src.data.sources import SOURCES
    from src.data.tokenizers import build_tokenizer
    from src.objectives import OBJECTIVES
    from src.training.budget import match_mode, training_budget

    # a run planned for GPUs is checked as on a machine with them (the budget is per device)
    spec = validate_run_config(cfg, hardware=Hardware(True, 8, True, "stand-in GPU"))
    tokenizer = build_tokenizer(spec.section("tokenizer"))
    if getattr(tokenizer, "fitted", True) is False:  # a char vocabulary the data would fit
        tokenizer.fit("".join(map(chr, range(256))))
    data = spec.data
    dm = datamodule_for(
        data.kind,
        SOURCES.get(data.name)(**thaw(data.source_args)),
        tokenizer,
        block_size=data.block_size,
        batch_size=data.batch_size,
        seed=data.seed,
        **thaw(data.loader),
    )
    spec = resolve(spec, tokenizer).spec
    plain = spec.to_dict()
    with torch.device("meta"):
        task = OBJECTIVES.get(spec.objective)(
            plain,
            tokenizer.state_dict(),
            model_config=spec.model,
            optimizer_config=spec.optimizer,
            schedule_config=spec.schedule,
        )
    lengths = (
        int(getattr(dm, "max_src_len", dm.block_size)),
        int(getattr(dm, "max_tgt_len", dm.block_size)),
    )
    trainer = plain.get("trainer") or {}
    steps = int(trainer.get("max_steps") or 0)
    assert steps > 0, f"trainer.max_steps={steps}: the run has no planned length"
    budget = training_budget(
        task,
        data.batch_format,
        int(plain["batch_size"]),
        lengths,
        int(trainer.get("accumulate_grad_batches") or 1),
        steps,
        match_mode(plain),
    )
    return float(budget.to_dict()["planned_flops"])


def cpu_minutes(flops: float) -> float:
    return flops / CPU_FLOPS_PER_S / 60


@pytest.fixture(scope="module")
def compose_train(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[str], DictConfig]]:
    """``compose_train(command)`` -> conf/train.yaml composed with the command's overrides (its
    first job, with stand-ins for what exists only on the reader's machine)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import src.training  # noqa: F401  (registers the resolvers, as src.train does)

    data_dir = tmp_path_factory.mktemp("stand_in_data")
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):

        def _compose(text: str) -> DictConfig:
            paths = ["paths.output_dir=/tmp/unused", "paths.root_dir=/tmp"]
            return compose("train", overrides=[*paths, *overrides_of(text, data_dir)])

        yield _compose
    GlobalHydra.instance().clear()


def verdict(c: Command, compose_train: Callable[[str], DictConfig]) -> tuple[bool, float]:
    """(passes, estimated CPU minutes): under ``CPU_MINUTES``, or marked GPU-sized."""
    minutes = cpu_minutes(planned_flops(compose_train(c.text)))
    return minutes < CPU_MINUTES or GPU_MARKER in c.context, minutes


def command(text: str, context: str = "") -> Command:
    """A command as if a doc held it, with ``context`` (default: the command) as its line."""
    return Command("README.md", 1, text, context or text)


def test_the_checker_flags_the_gpt2_small_default_and_passes_the_quick_start(
    compose_train: Callable[[str], DictConfig],
) -> None:
    ok, minutes = verdict(command("python -m src.train"), compose_train)
    assert not ok and minutes > 100 * CPU_MINUTES, minutes  # 124 M parameters, 5,000 steps
    swap = "python -m src.train model/position=my_pos model.position.alpha=0.5"
    ok, swap_minutes = verdict(command(swap), compose_train)
    assert not ok and swap_minutes > 100 * CPU_MINUTES, swap_minutes
    assert verdict(command(swap, f"{swap}   # {GPU_MARKER}"), compose_train)[0]
    ok, minutes = verdict(command(f"OMP_NUM_THREADS=1 {swap} experiment=quickstart"), compose_train)
    assert ok and minutes < CPU_MINUTES / 5, minutes
    ok, minutes = verdict(command("python -m src.train experiment=quickstart"), compose_train)
    assert ok and 0.5 < minutes < 2, minutes  # the measurement the rate comes from: ~1 minute


def test_a_sweep_is_checked_by_its_first_job(tmp_path: Path) -> None:
    sweep = "python -m src.train -m experiment=quickstart model/position=learned,rope seed=1,2,3"
    assert overrides_of(sweep) == ["experiment=quickstart", "model/position=learned", "seed=1"]
    optuna = (
        "python -m src.train -m 'optim.lr=tag(log,interval(1e-4,1e-2))' 'model.n_layer=range(2,8)'"
    )
    assert overrides_of(optuna) == ["model.n_layer=2"]
    listed = "python -m src.train 'logger=[csv,tensorboard]' hydra.sweep.dir=a,b"
    assert overrides_of(listed) == ["logger=[csv,tensorboard]", "hydra.sweep.dir=a,b"]
    own = overrides_of("python -m src.train data=text data.path=my_corpus/ ckpt_path=x", tmp_path)
    assert own[1] == f"data.path={tmp_path / 'my_corpus'}" and own[2] == "ckpt_path=null"


def test_commands_are_read_from_blocks_spans_and_continuations() -> None:
    commands = doc_commands()
    texts = {c.text for c in commands}
    assert "python -m src.train experiment=quickstart" in texts
    # an inline span, one across a line break, a comment dropped, continuations and a loop
    assert any(c.file == "models.md" and "model.position.alpha=0.5" in c.text for c in commands)
    assert any(c.file == "training.md" and c.text.endswith("model=gpt2_small") for c in commands)
    assert all("#" not in c.text and not c.text.endswith("\\") for c in commands)
    (probes,) = [c for c in commands if c.text.startswith("OMP_NUM_THREADS=1 python -m src.train")]
    assert "model.n_layer=2 " in probes.text and "trainer.max_steps=1500" in probes.text


def test_every_doc_command_runs_on_a_cpu_or_says_it_is_gpu_sized(
    compose_train: Callable[[str], DictConfig],
) -> None:
    commands = doc_commands()
    skipped = {c.where: (c.text, r) for c in commands if (r := not_a_recipe(c)) is not None}
    checked = [c for c in commands if c.where not in skipped]
    failures = []
    for c in checked:
        ok, minutes = verdict(c, compose_train)
        if not ok:
            failures.append(f"{c.where}: ~{minutes:,.0f} CPU minutes: {c.text}")
    # each allow-list entry picks out exactly one command the docs still hold
    picked = {entry: [c.where for c in commands if _picks(entry, c)] for entry in NOT_RECIPES}
    assert all(len(w) == 1 for w in picked.values()), picked
    assert len(checked) >= 40, len(checked)
    assert not failures, (
        f"{len(failures)} of {len(checked)} commands ({len(skipped)} not recipes: {skipped}) "
        f"take over {CPU_MINUTES:.0f} minutes on a laptop CPU at {CPU_FLOPS_PER_S:.1e} FLOP/s "
        f"and do not say '{GPU_MARKER}' on their line or in the sentence before their block "
        f"(add '# {GPU_MARKER}', or experiment=quickstart where the recipe is for a laptop):\n"
        + "\n".join(failures)
    )
