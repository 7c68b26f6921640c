"""A sweep's job folders named by what varies, and its directory said at its start and its end.

Hydra numbers a multirun's job folders (0, 1, …) and its launchers never print the sweep
directory (the basic launcher says "Launching N jobs locally", joblib and submitit say less).
``conf/hydra/default.yaml`` names each job folder ``${sweep_subdir:${hydra.job.override_dirname}}``
(``src/runs/resume.py``), and the ``SweepDirs`` Hydra callback (``hydra.callbacks.sweep_dirs``),
which runs in the sweeping process whatever the launcher (basic, joblib, submitit, optuna):

* ``on_multirun_start``: with ``name_by: swept`` (the default), leaves out of
  ``override_dirname`` every command-line override that is *not* swept (``trainer.max_steps=50``
  in ``-m model/position=learned,rope trainer.max_steps=50``), so the folders read
  ``model.position=learned`` and ``model.position=rope``. It does so the way a user would, by
  adding ``hydra.job.config.override_dirname.exclude_keys=[…]`` (the keys already excluded kept)
  to the sweep's Hydra overrides, which Hydra applies to every job's config
  (``ConfigLoader.load_sweep_config``); each job's ``.hydra/hydra.yaml`` shows it. A re-run of the
  same command gives the same names, so ``sweep_resume`` finds the finished jobs. ``name_by: all``
  keeps every override (the studies: their folder names are part of their committed ``runs/``).
  Then it prints ``sweep directory: <abs path>``.
* ``on_multirun_end``: the directory again, how many job folders hold a metrics.json, and the
  command that compares them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, read_write

from src.errors import ConfigError
from src.jsonfile import METRICS

NAME_BY = ("swept", "all")
EXCLUDE_KEY = "hydra.job.config.override_dirname.exclude_keys"


def sweep_dir(config: DictConfig) -> Path | None:
    value = OmegaConf.select(config, "hydra.sweep.dir")
    return None if value in (None, "") else Path(str(value)).resolve()


def fixed_keys(task_overrides: list[str]) -> list[str]:
    """The keys of the command-line overrides that do not sweep (``seed=1``, not ``seed=1,2``)."""
    parsed = OverridesParser.create().parse_overrides(list(task_overrides))
    swept = {o.key_or_group for o in parsed if o.is_sweep_override()}
    return sorted({o.key_or_group for o in parsed if not o.is_sweep_override()} - swept)


class SweepDirs(Callback):
    """Names job folders by the swept overrides and prints the sweep directory (see the module
    doc)."""

    def __init__(self, name_by: Literal["swept", "all"] = "swept") -> None:
        if name_by not in NAME_BY:
            raise ConfigError(
                f"hydra.callbacks.sweep_dirs.name_by={name_by!r} is not one of {list(NAME_BY)}; "
                "swept names job folders by the swept overrides only, all by every override"
            )
        self.name_by = name_by

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if self.name_by == "swept":
            self._name_by_swept_keys(config)
        d = sweep_dir(config)
        if d is not None:
            print(f"sweep directory: {d} (one folder per job, named by its overrides)", flush=True)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        d = sweep_dir(config)
        if d is None:
            return
        jobs = sorted(p.parent for p in d.glob(f"*/{METRICS}"))
        print(
            f"\nsweep finished: {len(jobs)} job folder(s) with {METRICS} in {d}\n"
            f"compare them: python -m src.report {d}",
            flush=True,
        )

    @staticmethod
    def _name_by_swept_keys(config: DictConfig) -> None:
        # unresolved: an override's value may hold an interpolation (+x=${paths.output_dir})
        task = OmegaConf.to_container(config.hydra.overrides.task, resolve=False)
        fixed = fixed_keys([str(o) for o in task])  # type: ignore[union-attr]
        if not fixed:
            return
        already = [
            str(k)
            for k in OmegaConf.to_container(
                config.hydra.job.config.override_dirname.exclude_keys, resolve=False
            )
        ]  # type: ignore[union-attr]
        keys = [*already, *(k for k in fixed if k not in already)]
        quoted = ",".join("'" + k.replace("\\", "\\\\").replace("'", "\\'") + "'" for k in keys)
        with read_write(config.hydra.overrides):
            config.hydra.overrides.hydra.append(f"{EXCLUDE_KEY}=[{quoted}]")
        with read_write(config):
            OmegaConf.update(config, EXCLUDE_KEY, keys, merge=False)
