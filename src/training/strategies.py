"""Strategy builders for configs that need Python objects (classes) as arguments."""

from __future__ import annotations

from typing import Any


def fsdp_strategy(
    sharding_strategy: str = "FULL_SHARD",
    activation_checkpointing: bool = False,
    state_dict_type: str = "full",
    **kwargs: Any,
):  # -> FSDPStrategy
    """FSDP with one unit per Transformer ``Block`` (embeddings and head stay in the root unit)."""
    from lightning.pytorch.strategies import FSDPStrategy

    from src.models.components.block import Block

    return FSDPStrategy(
        auto_wrap_policy={Block},
        activation_checkpointing_policy={Block} if activation_checkpointing else None,
        sharding_strategy=sharding_strategy,
        state_dict_type=state_dict_type,
        **kwargs,
    )
