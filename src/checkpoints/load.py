"""Load a training checkpoint without Lightning's trainer: model, tokenizer, config, task; or
only its weights into a new run (``init_from``, fine-tuning).

The checkpoint holds only plain data in ``hyper_parameters`` (``cfg``: the resolved run
config; ``tokenizer``: the tokenizer state), so it loads with ``torch.load(weights_only=True)``
(no pickled classes are executed) and rebuilds the exact model and tokenizer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch

from src.checkpoints.fit import check_state_dict_fits
from src.checkpoints.io import checkpoint_file, safe_torch_load
from src.data.tokenizers import Tokenizer
from src.errors import CheckpointError
from src.models import TransformerModel
from src.models.config import ModelConfig
from src.models.sizes import check_sizes_fit, weight_count
from src.objectives.base import LMTask
from src.objectives.registry import OBJECTIVES


@dataclass
class LoadedCheckpoint:
    model: TransformerModel  # in eval mode
    tokenizer: Tokenizer | None
    cfg: dict[str, Any]  # the plain resolved run config
    task: LMTask  # the LightningModule holding the model (e.g. for trainer.validate/test)
    global_step: int = 0
    path: str = ""


def load_checkpoint(
    path: str | os.PathLike[str], map_location: str | torch.device = "cpu"
) -> LoadedCheckpoint:
    """Rebuild the task from ``hyper_parameters`` and load its weights (strictly)."""
    p = checkpoint_file(path)  # CheckpointError for a directory or a missing file
    # weights_only=True; clear errors for pickles, torn files
    ckpt = safe_torch_load(p, map_location=map_location)
    hp = ckpt.get("hyper_parameters") if isinstance(ckpt, dict) else None
    if not hp or "cfg" not in hp:
        raise CheckpointError(
            f"{p} has no hyper_parameters.cfg: it was not written by src.train; give a checkpoint "
            "of a src.train run"
        )
    cfg = hp["cfg"]
    state = ckpt.get("state_dict")
    if (
        not isinstance(state, dict)
        or not isinstance(cfg, dict)
        or not isinstance(cfg.get("model"), dict)
    ):
        raise CheckpointError(
            f"{p} has no state_dict or no hyper_parameters.cfg.model: it was not written by "
            "src.train or is damaged; give a checkpoint of a src.train run"
        )
    # sizes against the stored weights, before anything is allocated (vocab_size=1e9, n_layer=1e6:
    # src/models/sizes.py)
    check_sizes_fit(ModelConfig.from_dict(cfg["model"]), weight_count(state.values()), where=str(p))
    cls = OBJECTIVES.get(cfg["objective"]["name"])
    task = cls(cfg, hp.get("tokenizer"))
    # names every mismatched key and shape
    check_state_dict_fits(task, ckpt, path=str(p), current_cfg=cfg)
    task.load_state_dict(ckpt["state_dict"], strict=True)
    task.eval()
    return LoadedCheckpoint(
        model=task.model,
        tokenizer=task.tokenizer,
        cfg=cfg,
        task=task,
        global_step=int(ckpt.get("global_step", 0)),
        path=str(p),
    )


def check_init_from(init_from: Any, ckpt_path: Any) -> None:
    """``init_from`` and ``ckpt_path`` are two different starts: one of them at most (also checked
    by ``validate_run_config``, before anything is built)."""
    if init_from and ckpt_path:
        raise CheckpointError(
            f"init_from={init_from} and ckpt_path={ckpt_path} both set: ckpt_path resumes that run "
            "(same config, its optimizer and step), init_from starts a new one from its weights; "
            "keep one of them"
        )


def init_from_checkpoint(
    task: LMTask, path: str | os.PathLike[str], resume_path: str | None = None
) -> None:
    """Fine-tuning (``init_from=<ckpt>``): the weights of ``path`` into ``objective``, nothing else: the
    run starts at step 0 with a fresh optimizer, schedule and data position, and its config may
    differ from the checkpoint's; every shape must fit (``CheckpointError`` listing the
    mismatches)."""
    check_init_from(path, resume_path)
    p = checkpoint_file(path)
    ckpt = safe_torch_load(p)
    check_state_dict_fits(task, ckpt, path=str(p))
    task.load_state_dict(ckpt["state_dict"], strict=True)
