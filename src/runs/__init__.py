"""Per-run infrastructure: what every run and sweep job needs around its training.

* ``lock``: one live job per run directory;
* ``slots``: a parallel sweep job's share of the machine's CPUs and GPUs;
* ``plugins``: a Hydra launcher or sweeper named without its plugin installed, as one line;
* ``resume``: deterministic sweep job directories and skipping the jobs that finished;
* ``output_dir``, ``sweep_dirs``: the Hydra callbacks that check a run directory before anything
  is written, and name sweep job folders by what they vary.

Importing this package registers the ``${sweep_subdir:...}`` resolver that conf/hydra/default.yaml
uses (Hydra resolves it before a job's task function runs, so ``src.train`` imports this package
at its top).
"""

from src.runs.resume import register_resolvers

register_resolvers()
