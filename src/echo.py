"""What a run says on the console also goes to its log file (``<run dir>/train.log``).

Hydra's job logging writes every Python log record to ``<run dir>/<job name>.log`` (``train.log``)
and prints it to the console. Three kinds of console output would miss the file:

* Lightning's own lines ("GPU available: …", "`Trainer.fit` stopped: …"): when ``lightning`` is
  imported before Hydra sets up logging (always: the entry points import it), its loggers get
  their own console handler and stop propagating, so Hydra's file handler never sees them;
* what this project prints as text, not as a log line: the model summary, a text sample, the final
  losses and where the outputs went;
* progress bars, which are redrawn in place and are not worth keeping in a file.

``mirror_lightning_to_log_file`` gives Lightning's loggers Hydra's file handlers (the console
stays as it was); ``echo`` prints a text and hands it to the same file handlers. Progress bars
stay console-only. Layer 2 (docs/ARCHITECTURE.md): imports nothing of ours.
"""

from __future__ import annotations

import logging

#: the loggers Lightning writes its info lines to
LIGHTNING_LOGGERS = ("lightning.pytorch", "lightning.fabric", "lightning")
_ECHO = logging.getLogger("src.echo")
_ECHO.propagate = (
    False  # the console already got the text from print(); only the file handlers get the record
)


def log_file_handlers() -> list[logging.FileHandler]:
    """The root logger's file handlers (Hydra's ``<run dir>/<job name>.log``)."""
    return [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]


def mirror_lightning_to_log_file() -> None:
    """Give Lightning's non-propagating loggers the root's file handlers (idempotent)."""
    files = log_file_handlers()
    for name in LIGHTNING_LOGGERS:
        lg = logging.getLogger(name)
        if lg.propagate:
            continue  # its records reach the root's handlers already
        for stale in [
            h for h in lg.handlers if isinstance(h, logging.FileHandler) and h not in files
        ]:
            lg.removeHandler(stale)  # a previous job's file (a multirun in one process)
        for h in files:
            if h not in lg.handlers:
                lg.addHandler(h)


def echo(text: str) -> None:
    """Print ``text`` and write it to the run's log file (when there is one)."""
    print(text, flush=True)
    to_log_file(text)


def to_log_file(text: str) -> None:
    """Write ``text`` to the run's log file only (what was shown on the console some other way)."""
    files = log_file_handlers()
    _ECHO.handlers[:] = files
    if files:
        _ECHO.setLevel(logging.INFO)
        _ECHO.info(text)
