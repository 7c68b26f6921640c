"""One file per Hugging Face ``model_type``; each registers its adapter in ``ADAPTERS``.

``ADAPTERS`` imports every module of this folder on its first lookup (``Registry(package=...)``,
as every registry does), so adding a format is adding one file (``<model_type>.py``, see
docs/hf.md): there is no central list to edit.
"""
