"""Hydra plugins the configs name, and the extra that installs each.

Without its plugin, ``-m hydra/launcher=submitit_slurm`` ends in Hydra's bare "Unknown plugin
class" (or "Could not find 'hydra/launcher/joblib'"). ``check_plugins`` (called by the entry
points before Hydra starts) turns that into one line naming the pip extra to install.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

# config group option -> (the plugin's module, its PyPI name, our extra that installs it)
PLUGINS: dict[str, tuple[str, str, str]] = {
    "hydra/launcher=joblib": (
        "hydra_plugins.hydra_joblib_launcher",
        "hydra-joblib-launcher",
        "sweeps",
    ),
    "hydra/launcher=submitit_slurm": (
        "hydra_plugins.hydra_submitit_launcher",
        "hydra-submitit-launcher",
        "slurm",
    ),
    "hydra/launcher=submitit_local": (
        "hydra_plugins.hydra_submitit_launcher",
        "hydra-submitit-launcher",
        "sweeps",
    ),
    "hydra/sweeper=optuna": (
        "hydra_plugins.hydra_optuna_sweeper",
        "hydra-optuna-sweeper",
        "sweeps",
    ),
}


class MissingPlugin(SystemExit):
    """Exits with status 1, printing the message (no traceback). A ``SystemExit``, not a
    ``src.errors`` type: it is raised before Hydra starts, where no ``clean_errors`` prints one line."""


def missing_plugin(overrides: Sequence[str]) -> str | None:
    """The message for the first override whose plugin is not installed, else None."""
    for arg in overrides:
        option = arg.lstrip("+").replace(" ", "")
        if option not in PLUGINS:
            continue
        module, package, extra = PLUGINS[option]
        if (
            importlib.util.find_spec(module.split(".")[0]) is None
            or importlib.util.find_spec(module) is None
        ):
            return (
                f"{option} needs the Hydra plugin {package}, which is not installed: "
                f"pip install -e '.[{extra}]'   (or pip install {package}; .[dev] has every plugin)"
            )
    return None


def check_plugins(argv: Sequence[str]) -> None:
    """Exit with ``missing_plugin``'s message when a command-line override needs an absent
    plugin."""
    message = missing_plugin(argv)
    if message is not None:
        raise MissingPlugin(message)
