"""The checks an entry point runs on its command line before Hydra starts.

They need only Hydra, OmegaConf and PyYAML: an entry point imports Lightning, transformers and
matplotlib inside its task function, so a mistyped command is answered before they load
(perf/cli_latency.py times it against ``python -c "import lightning"``).
"""

from __future__ import annotations

from collections.abc import Sequence

from src.config.typos import check_command_line
from src.config.yaml_limits import check_command_line_yaml
from src.runs.plugins import check_plugins


def preflight(config_name: str, argv: Sequence[str]) -> None:
    """Exit with one line when the command line cannot run:

    1. a YAML alias bomb in a named config file (a line, not a hang);
    2. a misspelt key or group value (the closest accepted names);
    3. a Hydra launcher or sweeper whose plugin is not installed (the extra to install).
    """
    check_command_line_yaml(argv)
    check_command_line(config_name, argv)
    check_plugins(argv)
