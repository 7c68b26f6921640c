"""One run directory per run with DDP under Hydra, also inside a multirun.

Lightning's DDP launcher (``_SubprocessScriptLauncher``) starts ranks > 0 by re-running the
command line (``sys.argv``) with ``hydra.run.dir=<HydraConfig.run.dir>``. Two things go wrong
with that under Hydra:

* in a multirun, ``sys.argv`` holds ``-m`` and the whole sweep, so every rank > 0 would start
  the entire sweep again (duplicated runs), and ``hydra.run.dir`` is not the job's directory
  (that is ``hydra.sweep.dir/subdir``);
* an unresolved ``${now:...}`` in ``hydra.run.dir`` could resolve to a different second.

``hydra_child_command`` instead rebuilds the child's command from *this job's* overrides
(``HydraConfig.overrides.task``) and points it at *this job's* resolved output directory
(``hydra.runtime.output_dir``), with ``hydra.output_subdir=null`` so only rank 0 writes
``.hydra/``. ``install_ddp_launcher_fix`` puts it in place of Lightning's function (the
same approach as lightning-hydra-template's advice to pass ``hydra.run.dir`` explicitly).

External launchers (SLURM ``srun``, ``torchrun``) start every rank themselves: under SLURM,
hydra-submitit-launcher gives all tasks of a job the same directory; with ``torchrun`` pass
``hydra.run.dir=...`` explicitly (docs/training.md).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence

_CONFIG_FLAGS = ("--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd")
_DROP_HYDRA = (
    "hydra.run.",
    "hydra.sweep.",
    "hydra.launcher",
    "hydra/launcher",
    "hydra.sweeper",
    "hydra/sweeper",
    "hydra.mode",
    "hydra.job.name",
    "hydra.output_subdir",
    "hydra.job.num",
    "hydra.job.id",
)


def _config_flags(argv: Sequence[str]) -> list[str]:
    """``--config-path/--config-name/--config-dir`` (both ``--x y`` and ``--x=y`` forms) from
    argv."""
    out: list[str] = []
    it = iter(range(len(argv)))
    for i in it:
        a = argv[i]
        if a in _CONFIG_FLAGS and i + 1 < len(argv):
            out += [a, argv[i + 1]]
            next(it, None)
        elif a.split("=", 1)[0] in _CONFIG_FLAGS and "=" in a:
            out.append(a)
    return out


def hydra_child_command(local_rank: int) -> tuple[list[str], str]:
    """(command, cwd) that starts rank ``local_rank`` of the current Hydra job in the same run
    dir."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.utils import get_original_cwd, to_absolute_path

    import __main__

    hc = HydraConfig.get()
    if __main__.__spec__ is None:  # python path/to/train.py
        command = [sys.executable, to_absolute_path(sys.argv[0])]
    else:  # python -m src.train
        command = [sys.executable, "-m", __main__.__spec__.name]
    command += _config_flags(sys.argv[1:])
    command += list(hc.overrides.task)
    command += [o for o in hc.overrides.hydra if not o.lstrip("+~").startswith(_DROP_HYDRA)]
    command += [
        f'hydra.run.dir="{hc.runtime.output_dir}"',
        f"hydra.job.name={hc.job.name}_rank{local_rank}",
        "hydra.output_subdir=null",
    ]
    return command, get_original_cwd()


def install_ddp_launcher_fix() -> None:
    """Make Lightning's subprocess DDP launcher use ``hydra_child_command`` (idempotent)."""
    from src.lightning_compat import replace_ddp_child_command

    replace_ddp_child_command(_lightning_signature)


def _lightning_signature(local_rank: int) -> tuple[Sequence[str], str]:
    return hydra_child_command(local_rank)


# environment variables Lightning's subprocess launcher sets in the *launching* process
_LAUNCHER_ENV = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "LOCAL_RANK", "WORLD_SIZE")


@contextlib.contextmanager
def launcher_scope() -> Iterator[None]:
    """Undo what a DDP run leaves in the process that launched its ranks, so the next multirun
    job in the same process launches its own ranks again.

    Lightning's launcher exports ``LOCAL_RANK=0`` (and the master address/port, world size) into
    the launching process and initialises a process group there. A second job would then take
    ``LOCAL_RANK`` as a sign that an external launcher started it, spawn no children, and talk
    to the first job's finished ranks through the old group. On exit this restores the
    variables and destroys the group — only in a process that was not itself started as a rank
    (``LOCAL_RANK`` unset at entry); ranks started by SLURM, torchrun or the launcher exit after
    their job anyway.
    """
    before = {k: os.environ.get(k) for k in _LAUNCHER_ENV}
    launching = before["LOCAL_RANK"] is None
    try:
        yield
    finally:
        if launching:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                dist.destroy_process_group()
            for k, v in before.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
