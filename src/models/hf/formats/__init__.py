"""One file per Hugging Face ``model_type``; each registers its adapter in ``ADAPTERS``.

Every module in this folder is imported here, so adding a format is adding one file
(``<model_type>.py``, see docs/hf.md): there is no central list to edit.
"""
from __future__ import annotations

import importlib
import pkgutil

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
