"""A YAML file a run would read, checked for alias expansion before Hydra loads it.

YAML aliases (``&a`` … ``*a``) let a few lines name an exponential number of values (the "billion
laughs" file: nine lists of nine aliases of the previous list are 9⁹ strings). PyYAML builds such
a file cheaply, sharing one object per anchor, but OmegaConf copies every reference when it makes
the config, so ``python -m src.train experiment=<that file>`` would hang with no output until
memory ran out. ``check_command_line_yaml`` runs first in ``src.train`` (before ``@hydra.main``):
it composes (``yaml.compose``: nodes only, aliases not expanded) each config file the command line
names — every ``.yaml`` under ``--config-dir`` / ``--config-path`` / ``hydra.searchpath`` and the
file of each ``group=option`` override found under ``conf/`` — and counts the values each top-level
key expands to, each shared node counted once per reference (memoised, so linear in the file).
Over ``MAX_VALUES`` is one line naming the file and the key, and exit status 1.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import yaml

from src.errors import ConfigError

#: values one config file may expand to (conf/ files hold a few hundred; a study's sweep a few
#: thousand)
MAX_VALUES = 1_000_000
CONF = Path(__file__).resolve().parents[2] / "conf"


def expanded_size(node: yaml.Node, memo: dict[int, int], active: set[int]) -> int:
    """The number of values ``node`` stands for once every alias is expanded (a scalar is 1)."""
    key = id(node)
    if key in memo:
        return memo[key]
    # an alias inside its own anchor: a recursive structure never finishes expanding
    if key in active:
        raise RecursionError
    active.add(key)
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(expanded_size(child, memo, active) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(
            expanded_size(k, memo, active) + expanded_size(v, memo, active) for k, v in node.value
        )
    else:
        size = 1
    active.discard(key)
    memo[key] = size
    return size


def check_yaml_file(path: Path, limit: int = MAX_VALUES) -> None:
    """``ConfigError`` naming ``path`` and its key when the file expands to more than ``limit``
    values."""
    try:
        with open(path, encoding="utf-8") as f:
            roots = list(yaml.compose_all(f, Loader=yaml.SafeLoader))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return  # not ours to report: Hydra names the file and the syntax error when it loads it
    memo: dict[int, int] = {}
    for root in roots:
        items = (
            root.value
            if isinstance(root, yaml.MappingNode)
            else [(yaml.ScalarNode("tag:yaml.org,2002:str", "<document>"), root)]
        )
        for k, v in items:
            try:
                size = expanded_size(v, memo, set())
            except RecursionError:
                raise ConfigError(
                    f"{path}: key '{k.value}' refers to itself through a YAML alias (&anchor ... "
                    "*anchor inside it), which never finishes expanding; write the values out"
                ) from None
            if size > limit:
                raise ConfigError(
                    f"{path}: key '{k.value}' expands to {size:,} values through YAML aliases "
                    f"(&anchor / *anchor), over the limit of {limit:,} for one config file: "
                    "loading it would not finish (a 'billion laughs' file). Remove the aliases or "
                    "write the values out"
                )


def named_files(argv: Sequence[str], conf: Path = CONF) -> Iterator[Path]:
    """The config files a Hydra command line points at (module docstring)."""
    dirs: list[Path] = []
    args = list(argv)
    for i, a in enumerate(args):
        for flag in ("--config-dir", "-cd", "--config-path", "-cp"):
            if a == flag and i + 1 < len(args):
                dirs.append(Path(args[i + 1]).expanduser())
            elif a.startswith(f"{flag}="):
                dirs.append(Path(a.split("=", 1)[1]).expanduser())
        key, _, value = a.lstrip("+~").partition("=")
        if key == "hydra.searchpath":
            dirs += [
                Path(p.strip(" '\"")[len("file://") :])
                for p in value.strip("[]").split(",")
                if p.strip(" '\"").startswith("file://")
            ]
        elif value and "/" not in value and not key.startswith(("hydra", "-")):
            for root in [conf, *dirs]:
                candidate = root / key.replace(".", "/") / f"{value}.yaml"
                if candidate.is_file():
                    yield candidate
    for d in dirs:
        if d.is_dir():
            yield from sorted(d.rglob("*.yaml"))


def check_command_line_yaml(argv: Sequence[str]) -> None:
    """Every config file the command line names, checked; one line and exit status 1 on the first
    over the limit."""
    try:
        for path in named_files(argv):
            check_yaml_file(path)
    except ConfigError as e:
        print(f"ConfigError: {e}", file=sys.stderr)
        raise SystemExit(1) from None
