"""Resumable sweeps: deterministic job directories and skipping jobs that already finished.

Importing this package registers the ``${sweep_subdir:...}`` resolver (``src.train`` imports
it), used by the study configs as::

    hydra:
      sweep:
        dir: outputs/studies/<study>
        subdir: ${sweep_subdir:${hydra.job.override_dirname}}
      job:
        config:
          override_dirname:
            exclude_keys: [experiment]
    sweep_resume:
      skip_completed: true

See ``src.studies.resume`` and docs/studies.md.
"""

from src.studies.resume import Completed, job_dirname, register_resolvers, skip_completed

register_resolvers()

__all__ = ["Completed", "job_dirname", "register_resolvers", "skip_completed"]
