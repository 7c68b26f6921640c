"""Hugging Face interop: load transformers checkpoints into our models, and export them back.

::

    config.json ──config_from_hf──▶ ModelConfig ──build_model──▶ TransformerModel
    model.safetensors ──adapter rules (rename, transpose, fuse)──▶ state dict ──load_state_dict(strict)──┘
    TransformerModel ──to_hf──▶ config.json + model.safetensors (loads with transformers' Auto* classes)

One state-dict adapter per external format (as torchtitan), chosen by the checkpoint's
``model_type`` from the ``ADAPTERS`` registry. The package, read bottom up:

* ``rules``    the rule mini-language: ``Same``, ``Transposed``, ``Fused``, ``FoldedSegment``, ``Constant``
* ``architecture``  ``Architecture``: which of our configs a format holds; the activation names
* ``adapter``  ``Adapter`` (what a format provides), ``ADAPTERS``, ``get_adapter``
* ``formats/`` one file per ``model_type`` (gpt2, llama, qwen3, bert, marian, t5); a new format is
  one new file
* ``files``    checkpoint folders: resolve (local or Hub), read config.json and tensors, write
* ``convert``  ``config_from_hf``, ``convert_from_hf``, ``convert_to_hf``, ``from_hf``, ``to_hf``

No code from a checkpoint is ever run (there is no ``trust_remote_code``): we read
config.json and tensors only.
"""

from src.models.hf.adapter import ADAPTERS, Adapter, get_adapter
from src.models.hf.architecture import ANY, Architecture
from src.models.hf.convert import (
    config_from_hf,
    convert_from_hf,
    convert_to_hf,
    export_adapter,
    from_hf,
    to_hf,
)

__all__ = [
    "ADAPTERS",
    "ANY",
    "Adapter",
    "Architecture",
    "config_from_hf",
    "convert_from_hf",
    "convert_to_hf",
    "export_adapter",
    "from_hf",
    "get_adapter",
    "to_hf",
]
