"""Where a run's numbers came from: the code (git commit, a dirty tree and a hash of its diff, the
untracked files under ``src/`` and ``conf/`` with their hashes), the library versions and the
device. ``train`` writes it into metrics.json under ``provenance``;
``src.report`` carries it into runs.csv and warns when the runs of one study differ.

Nothing here may fail a run: a field that cannot be read (no git, a package not installed) is None.
"""

from __future__ import annotations

import hashlib
import platform
import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: the packages whose versions decide the numbers (their distribution names)
PACKAGES = {
    "torch": "torch",
    "lightning": "lightning",
    "transformers": "transformers",
    "hydra": "hydra-core",
}
#: where an untracked file is code or config a run may load (a registered variant's module, its YAML)
CODE_DIRS = ("src", "conf")
#: the keys of ``provenance()``, in the order runs.csv gives them
FIELDS = (
    "git_commit",
    "git_dirty",
    "git_diff_sha256",
    "git_untracked",
    "python",
    *PACKAGES,
    "cpu",
    "gpu",
    "gpu_count",
)


def _git(*args: str) -> str | None:
    try:
        r = subprocess.run(["git", *args], cwd=REPO, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.decode("utf-8", "replace") if r.returncode == 0 else None


def package_version(dist: str) -> str | None:
    """A distribution's installed version without importing it, or None."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def cpu_model() -> str | None:
    """The CPU's model name (/proc/cpuinfo, else the platform's), or None."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


@lru_cache(maxsize=1)
def code_state() -> dict[str, Any]:
    """The commit of the checkout ``src`` runs from, whether its tree differs from it, the sha256 of
    ``git diff HEAD`` (the tracked changes) when it does, and the untracked files under
    ``CODE_DIRS`` (a variant's module or YAML not yet added: it changes what runs as much as a
    diff does), as ``path=<sha256 of its bytes>`` joined by ``; ``. None without git."""
    commit = _git("rev-parse", "HEAD")
    if commit is None:
        return {
            "git_commit": None,
            "git_dirty": None,
            "git_diff_sha256": None,
            "git_untracked": None,
        }
    status = _git("status", "--porcelain", "--untracked-files=no") or ""
    diff = _git("diff", "HEAD") if status.strip() else None
    listed = _git("ls-files", "--others", "--exclude-standard", "-z", "--", *CODE_DIRS) or ""
    untracked = [
        f"{name}={_file_sha256(REPO / name)}" for name in sorted(filter(None, listed.split("\0")))
    ]
    return {
        "git_commit": commit.strip(),
        "git_dirty": bool(status.strip()) or bool(untracked),
        "git_diff_sha256": hashlib.sha256(diff.encode()).hexdigest() if diff is not None else None,
        "git_untracked": "; ".join(untracked) or None,
    }


def _file_sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def provenance() -> dict[str, Any]:
    """``FIELDS`` of this process: code state, versions, CPU model, GPU name and count."""
    record: dict[str, Any] = dict(code_state())
    record["python"] = platform.python_version()
    record.update({name: package_version(dist) for name, dist in PACKAGES.items()})
    record["cpu"] = cpu_model()
    gpu, count = None, 0
    try:
        import torch

        if torch.cuda.is_available():
            count = torch.cuda.device_count()
            gpu = torch.cuda.get_device_name(0)
    except Exception:  # a broken CUDA install must not fail the record of a run
        pass
    record["gpu"], record["gpu_count"] = gpu, count
    return record
