"""The package structure docs/ARCHITECTURE.md states holds in the code.

* imports go downward only, in the layer order written in docs/ARCHITECTURE.md (every import
  statement counts, also inside functions and ``TYPE_CHECKING`` blocks);
* every package and top-level module of ``src/`` is in that order, once;
* ``tests/`` mirrors ``src/``: each test folder is named after a package of ``src/``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
ARCHITECTURE = REPO / "docs" / "ARCHITECTURE.md"


def declared_layers() -> dict[str, int]:
    """``{package: layer}`` from the ``layer N  name name …`` lines of ARCHITECTURE.md."""
    text = ARCHITECTURE.read_text()
    block = text.split("## Import order", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    layers: dict[str, int] = {}
    for line in block.strip().splitlines():
        m = re.match(r"layer (\d+)\s+([^(]+)", line)
        assert m, f"unreadable line in ARCHITECTURE.md's import order: {line!r}"
        for name in m.group(2).split():
            assert name not in layers, f"{name} is listed twice in ARCHITECTURE.md"
            layers[name] = int(m.group(1))
    return layers


def unit_of(module: str) -> str | None:
    """``src.models.components.attention`` -> ``models``; ``src.train`` -> ``train``."""
    parts = module.split(".")
    return parts[1] if parts[0] == "src" and len(parts) > 1 else None


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every import statement in the file, at any depth."""
    found: list[tuple[int, str]] = []
    package = (
        module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    )
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: resolve against this package
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
    return found


def src_files() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_package_is_in_the_declared_order() -> None:
    layers = declared_layers()
    units = {unit_of(module_name(p)) for p in src_files()} - {None}
    assert units <= set(layers), (
        f"docs/ARCHITECTURE.md's import order misses {sorted(units - set(layers))}"
    )


def test_imports_go_downward_only() -> None:
    layers = declared_layers()
    wrong: list[str] = []
    for path in src_files():
        here = unit_of(module_name(path))
        if here is None:  # src/__init__.py
            continue
        if here not in layers:
            wrong.append(
                f"{path.relative_to(REPO)} is in {here}, a package ARCHITECTURE.md does not list"
            )
            continue
        for line, target in imports(path):
            there = unit_of(target)
            if there is None or there == here:
                continue
            if there not in layers:
                wrong.append(
                    f"{path.relative_to(REPO)}:{line} imports {target}, a package ARCHITECTURE.md does not list"
                )
            elif layers[there] >= layers[here]:
                wrong.append(
                    f"{path.relative_to(REPO)}:{line}: {here} (layer {layers[here]}) imports {target} "
                    f"({there}, layer {layers[there]})"
                )
    assert not wrong, "imports against the order in docs/ARCHITECTURE.md:\n" + "\n".join(wrong)


def test_tests_mirror_src() -> None:
    src_packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    test_dirs = {
        p.name for p in (REPO / "tests").iterdir() if p.is_dir() and p.name != "__pycache__"
    }
    top_level = {"perf"}  # tests of the repository's other top-level package
    assert test_dirs - src_packages - top_level == set(), (
        f"test folders without a src package: {test_dirs - src_packages}"
    )
