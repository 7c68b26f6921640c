"""Extending the project the README's way keeps the suite green (issue 55).

A copy of the repository (``src/``, ``conf/``, ``tests/``) gets five new variants, each one
registered class in a new file plus one YAML, no import line anywhere: the README's own ``my_pos``
(read out of README.md's "Your own variant" section, as a user copies it), a norm, an FFN, an
optimizer and a synthetic task. The suite's tests that enumerate a registry or a config group then
run in that copy, and a short training run uses all of the new pieces. Slow: a pytest run and two
trainings in subprocesses.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]

#: the registry and config-group tests: each reads what is registered (or what conf/ holds)
REGISTRY_TESTS = [
    "tests/models/test_registry.py",
    "tests/optim/test_groups.py",
    "tests/test_optim.py",
    "tests/data/test_sources.py",
    "tests/config/test_error_catalogue.py",
]

NORM = '''"""A scale-only RMS norm without its epsilon inside the root (a test variant)."""

import torch
from torch import Tensor, nn

from src.models.components.norms import NORMS


@NORMS.register("my_norm")
class MyNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: Tensor) -> Tensor:  # [..., C] -> [..., C]
        return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + self.eps) * self.weight
'''

FFN = '''"""Squared ReLU (So et al. 2021, Primer), a test variant."""

from torch import Tensor
from torch.nn import functional as F

from src.models.components.ffn import FFNS, MLP


@FFNS.register("my_ffn")
class SquaredReluMLP(MLP):
    def act(self, x: Tensor) -> Tensor:
        return F.relu(x).square()
'''

OPTIMIZER = '''"""Plain SGD without momentum, a test variant."""

from dataclasses import dataclass

import torch
from torch import nn

from src.optim.base import OPTIMIZERS, OptimizerConfig, param_groups


@OPTIMIZERS.register("my_sgd")
@dataclass(frozen=True, kw_only=True)
class MySGD(OptimizerConfig):
    weight_decay: float = 0.0

    def build(
        self, model: nn.Module, device: torch.device, clips_under_mixed_precision: bool = False
    ) -> torch.optim.SGD:
        return torch.optim.SGD(param_groups(model, float(self.weight_decay)), lr=float(self.lr))
'''

TASK = '''"""Rotate a string left by one symbol, a test variant."""

from src.data.sources import SOURCES
from src.data.synthetic.strings import StringTask


@SOURCES.register("my_rotate")
class Rotate(StringTask):
    paper = "a test variant"

    def transform(self, s: str) -> str:
        return s[1:] + s[:1]
'''


def readme_variant() -> dict[str, str]:
    """The README's ``my_pos``: each code block of "Your own variant" whose first line is a comment
    naming its file -> {path: text}."""
    text = (REPO / "README.md").read_text()
    section = re.search(r"^## Your own variant\n(.*?)(?=^## )", text, re.S | re.M)
    assert section, "README.md has no '## Your own variant' section"
    files = {}
    for block in re.findall(r"^```(?:python|yaml)\n(.*?)^```", section.group(1), re.S | re.M):
        first = block.splitlines()[0]
        path = re.match(r"#\s*(\S+\.(?:py|yaml))", first)
        assert path, f"a README block without its file name: {first!r}"
        files[path.group(1).rstrip(":")] = block
    assert set(files) == {"src/models/components/my_pos.py", "conf/model/position/my_pos.yaml"}
    return files


def _copy(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for name in ("src", "conf", "tests", "perf"):
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, dest / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dest / name)


def _run(args: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        # the copy's src first (the editable install's finder comes after sys.path)
        "PYTHONPATH": str(cwd),
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMER_LAB_CACHE": str(cwd / "cache"),
    }
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_XDIST_WORKER_COUNT", None)
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_five_variants_added_the_readme_way_keep_the_registry_tests_green(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _copy(repo)
    files = {
        **readme_variant(),
        "src/models/components/my_norm.py": NORM,
        "conf/model/norm/my_norm.yaml": "name: my_norm\neps: 1.0e-6\n",
        "src/models/components/my_ffn.py": FFN,
        "conf/model/ffn/my_ffn.yaml": "name: my_ffn\n",
        "src/optim/my_sgd.py": OPTIMIZER,
        "conf/optim/my_sgd.yaml": "name: my_sgd\nlr: 0.1\nweight_decay: 0.0\n",
        "src/data/synthetic/my_rotate.py": TASK,
        "conf/data/my_rotate.yaml": (REPO / "conf/data/reverse.yaml")
        .read_text()
        .replace("name: reverse", "name: my_rotate"),
    }
    for path, text in files.items():
        target = repo / path
        assert not target.exists(), path
        target.write_text(text)

    # the copy's registries hold the new variants, found on first use
    probe = _run(
        [
            "-c",
            "from src.models.components import POSITIONS, NORMS, FFNS\n"
            "from src.optim import OPTIMIZERS\n"
            "from src.data.sources import SOURCES\n"
            "import src\n"
            "print(src.__file__)\n"
            "print(all(n in r.names() for r, n in ((POSITIONS, 'my_pos'), (NORMS, 'my_norm'), "
            "(FFNS, 'my_ffn'), (OPTIMIZERS, 'my_sgd'), (SOURCES, 'my_rotate'))))",
        ],
        repo,
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    origin, found = probe.stdout.split()
    assert Path(origin).is_relative_to(repo) and found == "True", probe.stdout

    suite = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *REGISTRY_TESTS], repo)
    assert suite.returncode == 0, suite.stdout[-5000:]
    # the new optimizer is among the parametrised cases, not skipped past
    listed = _run(
        ["-m", "pytest", "-q", "--collect-only", "-n", "0", "tests/optim/test_groups.py"], repo
    )
    assert "my_sgd" in listed.stdout

    short = [
        "trainer.max_steps=2",
        "trainer.val_check_interval=2",
        "trainer.limit_val_batches=1",
        "trainer.limit_test_batches=1",
        "scheduler.warmup_steps=1",
        "hydra.run.dir=out/lm",
    ]
    lm = _run(
        [
            "-m",
            "src.train",
            "experiment=quickstart",
            "model/position=my_pos",
            "model.position.alpha=0.5",
            "model/norm=my_norm",
            "model/ffn=my_ffn",
            "optim=my_sgd",
            *short,
        ],
        repo,
    )
    assert lm.returncode == 0, lm.stderr[-3000:]
    assert (repo / "out/lm/metrics.json").is_file()
    task = _run(
        [
            "-m",
            "src.train",
            "experiment=synthetic_quickstart",
            "data=my_rotate",
            *[s for s in short if not s.startswith("hydra.")],
            "hydra.run.dir=out/task",
        ],
        repo,
    )
    assert task.returncode == 0, task.stderr[-3000:]
    assert (repo / "out/task/metrics.json").is_file()
