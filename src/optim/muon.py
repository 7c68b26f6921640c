"""``optim=muon``: Muon for the hidden matrices, AdamW for everything else, as one optimiser.

Muon (Jordan et al. 2024, https://kellerjordan.github.io/posts/muon/) replaces each hidden
matrix's momentum update by its nearest semi-orthogonal matrix (five Newton-Schulz steps); it is
meant for the 2-D weights of the hidden layers only. The model says which those are
(``TransformerModel.hidden_matrices()``: the attention and FFN weights); the embeddings, the head,
norm gains and biases go to AdamW with the usual decay groups (``param_groups``: the head decayed
when untied, never the embeddings, norms or biases). The update is PyTorch's own
``torch.optim.Muon``; ``adjust_lr_fn: match_rms_adamw`` scales each matrix's step to AdamW's
update RMS (0.2·√max(A, B); Liu et al. 2025, "Muon is Scalable for LLM Training",
arXiv:2502.16982), so Muon and its AdamW share ``optim.lr`` and ``optim.weight_decay`` and a
learning-rate grid tuned for AdamW applies; ``original`` is Jordan's √max(1, A/B) (its lr is
then ~0.02).

**Under μP** (``model/parametrization=mup``) the hidden matrices follow the spectral condition of
feature learning (Yang, Simon & Bernstein 2023, arXiv:2310.17813; Bernstein's modular norm): an
update's spectral norm should be Θ(√(fan_out/fan_in)). Muon's orthogonalised step has spectral
norm lr × its adjustment, so ``original`` (√max(1, A/B)) already meets it at every width and needs
no multiplier, while ``match_rms_adamw`` (0.2·√max(A, B)) grows with √width and is divided by
√(its growth since the base width). The parameters AdamW updates take μP's Adam rates.

**One optimiser, not two.** Lightning's automatic optimisation steps one optimiser per step;
two would need manual optimisation in every objective, and an lr scheduler per optimiser.
``MuonWithAdamW`` is one ``torch.optim.Optimizer`` whose ``param_groups`` are the Muon group
followed by AdamW's two groups (the very dicts its two inner optimisers read) and whose
``state`` is shared with them: the scheduler scales every group, ``state_dict()`` is one
ordinary optimiser state, and ``load_state_dict`` re-points the inner optimisers at the loaded
groups and state, so a resumed run continues (tests/optim/test_muon.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from src.errors import ConfigError
from src.optim.base import (
    OPTIMIZERS,
    OptimizerConfig,
    check_betas,
    check_weight_decay,
    fused_devices,
    is_count,
    is_number,
    param_groups,
    with_lr_multipliers,
)


class MuonWithAdamW(torch.optim.Optimizer):
    """``torch.optim.Muon`` on ``muon_params``, ``torch.optim.AdamW`` on ``adamw_groups``, stepped
    together."""

    def __init__(
        self,
        muon_params: list[nn.Parameter] | list[dict[str, Any]],
        adamw_groups: list[dict[str, Any]],
        *,
        muon: dict[str, Any],
        adamw: dict[str, Any],
    ) -> None:
        self.muon = torch.optim.Muon(muon_params, **muon)
        self.adamw = torch.optim.AdamW(adamw_groups, **adamw)
        super().__init__([*self.muon.param_groups, *self.adamw.param_groups], {})
        self._link()

    def _link(self) -> None:
        """One list of groups and one state: the inner optimisers read this optimiser's."""
        n = len(self.muon.param_groups)
        self.muon.param_groups, self.adamw.param_groups = (
            self.param_groups[:n],
            self.param_groups[n:],
        )
        self.muon.state = self.adamw.state = self.state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # replaces self.param_groups and self.state with new objects
        super().load_state_dict(state_dict)
        self._link()

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.muon.step()
        self.adamw.step()
        return loss


@OPTIMIZERS.register("muon")
@dataclass(frozen=True, kw_only=True)
class Muon(OptimizerConfig):
    """``optim=muon``: ``torch.optim.Muon`` on ``model.hidden_matrices()``, AdamW on the rest.

    ``lr`` and ``weight_decay`` are shared by both parts (``adamw_lr`` null = ``lr``);
    ``momentum``, ``nesterov``, ``ns_steps`` and ``adjust_lr_fn`` are Muon's, ``betas`` and ``eps``
    AdamW's."""

    momentum: float = 0.95
    nesterov: bool = True
    ns_steps: int = 5
    adjust_lr_fn: Literal["match_rms_adamw", "original"] = "match_rms_adamw"
    weight_decay: float = 0.0
    adamw_lr: float | None = None
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8

    def __post_init__(self) -> None:
        super().__post_init__()
        if not is_number(self.momentum) or not 0 <= self.momentum < 1:
            raise ConfigError(
                f"optim.momentum={self.momentum!r} is invalid: in [0, 1), e.g. optim.momentum=0.95"
            )
        if not isinstance(self.nesterov, bool):
            raise ConfigError(f"optim.nesterov={self.nesterov!r} is invalid: true or false")
        if not is_count(self.ns_steps) or not 1 <= self.ns_steps < 100:
            raise ConfigError(
                f"optim.ns_steps={self.ns_steps!r} is invalid: Newton-Schulz iterations, 1 to 99 "
                "(Muon uses 5)"
            )
        if not hasattr(torch.optim, "Muon"):
            raise ConfigError(
                f"optim=muon needs torch.optim.Muon (PyTorch 2.9 or later), but this is torch "
                f"{torch.__version__}; upgrade torch or choose optim=adamw"
            )
        if self.adjust_lr_fn not in ("match_rms_adamw", "original"):
            raise ConfigError(
                f"optim.adjust_lr_fn={self.adjust_lr_fn!r} is invalid: match_rms_adamw (AdamW's "
                "update size: share AdamW's lr) or original (Jordan's; lr ~0.02)"
            )
        check_weight_decay(self.weight_decay)
        if self.adamw_lr is not None and (not is_number(self.adamw_lr) or self.adamw_lr <= 0):
            raise ConfigError(
                f"optim.adamw_lr={self.adamw_lr!r} is invalid: a positive learning rate for the "
                "parameters AdamW updates, or null (= optim.lr)"
            )
        object.__setattr__(self, "betas", check_betas(self.betas))
        if not is_number(self.eps) or self.eps <= 0:
            raise ConfigError(
                f"optim.eps={self.eps!r} is invalid: a small positive number, e.g. optim.eps=1e-8"
            )

    def build(
        self, model: nn.Module, device: torch.device, clips_under_mixed_precision: bool = False
    ) -> MuonWithAdamW:
        hidden_of = getattr(model, "hidden_matrices", None)
        hidden = [p for p in (hidden_of() if hidden_of is not None else []) if p.requires_grad]
        if not hidden:
            raise ConfigError(
                f"optim=muon needs a model with hidden matrices (attention and FFN weights), but "
                f"{type(model).__name__} declares none (model.n_layer=0?); use optim=adamw for it, "
                "or give the model layers"
            )
        lr, wd = float(self.lr), float(self.weight_decay)
        adamw_lr = float(self.adamw_lr) if self.adamw_lr is not None else lr
        groups = param_groups(model, wd, exclude=hidden, lr=adamw_lr)
        for g in groups:
            g["lr"] = adamw_lr * g.get("lr_mult", 1.0)
        # μP (model/parametrization=mup): the hidden matrices' spectral scaling per
        # optim.adjust_lr_fn (``MaximalUpdate._rule``); one group under sp
        multipliers_of = getattr(model, "lr_multipliers", None)
        multipliers = multipliers_of(f"muon_{self.adjust_lr_fn}") if multipliers_of else {}
        muon_params: list[Any] = (
            with_lr_multipliers([{"params": hidden, "weight_decay": wd}], multipliers, lr)
            if multipliers
            else hidden
        )
        # the fused kernel only inside: this outer optimiser unscales nothing itself, so Lightning
        # may clip
        fused = device.type in fused_devices()
        return MuonWithAdamW(
            muon_params,
            [g for g in groups if g["params"]],
            muon=dict(
                lr=lr,
                weight_decay=wd,
                momentum=float(self.momentum),
                nesterov=self.nesterov,
                ns_steps=int(self.ns_steps),
                adjust_lr_fn=self.adjust_lr_fn,
            ),
            adamw=dict(lr=adamw_lr, betas=self.betas, eps=float(self.eps), fused=fused),
        )
